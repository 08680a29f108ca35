// The input event, decoded and checked against the input schema (schemas/push-request.schema.json)
// before any rule sees it. A record that fails here goes to the dead-letter topic, never dropped.

public import JSON

/// One device an event addresses, as the event gave it (the token is validated per device later,
/// so one bad token rejects one request, not the whole event).
public struct EventDevice: Sendable, Hashable {
    public var token: String
    public var environment: String
    /// Set for a broadcast channel of the event's `channels` (then `token` is empty).
    public var channelID: String? = nil

    /// An environment as an event names it, `development` read as `sandbox`.
    static func environment(named name: String) -> String { name == "development" ? "sandbox" : name }
}

/// A decoded notification event.
public struct PushEvent: Sendable {
    public var id: String
    public var type: String
    /// Seconds since 1970 from `occurred_at`; nil when the event did not say.
    public var occurredAt: Double?
    public var app: String?
    /// The whole event as parsed, which rules match against and templates read from where it lies.
    public var document: JSONTape

    /// The devices of `devices`, read from the document when asked for (none once the pipeline has dropped
    /// it, after planning). Not made when the event is decoded: the rules make each token a string already,
    /// and the pipeline takes its devices from them.
    public var devices: [EventDevice] {
        document.withRoot { PushEventDecoder.targets($0["devices"], key: "token", isChannel: false) } ?? []
    }

    /// The broadcast channels of `channels`, each with `channelID` set; read as `devices` is.
    public var channels: [EventDevice] {
        document.withRoot { PushEventDecoder.targets($0["channels"], key: "id", isChannel: true) } ?? []
    }
}

/// Why a record could not become a `PushEvent`.
public struct EventDecodingError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// Not JSON at all, or not UTF-8.
        case undecodable = "undecodable"
        /// JSON, but not an event by the input schema.
        case schemaViolation = "invalid_event"
    }
    public var kind: Kind
    public var message: String
    public var description: String { message }
}

public enum PushEventDecoder {
    public static let maximumDevices = 1000

    public static func decode(_ bytes: [UInt8]?) throws(EventDecodingError) -> PushEvent {
        guard let bytes, !bytes.isEmpty else {
            throw EventDecodingError(kind: .undecodable, message: "the record has no value")
        }
        let document: JSONTape
        do {
            // A member named twice is refused: the producer and this worker could read it two ways.
            document = try JSONTape(parsing: bytes, maximumDepth: 64)
        } catch  where error.duplicateMemberName != nil {
            let name = PushEventSchema.quoted(error.duplicateMemberName ?? "")
            throw violation(
                "duplicate key \(name) at \(error.path) (line \(error.line), column \(error.column)); "
                    + "an object names each key once")
        } catch {
            throw EventDecodingError(
                kind: .undecodable, message: "not valid JSON: \(error)\(error.path == "$" ? "" : " at \(error.path)")")
        }
        return try decode(document: document)
    }

    public static func decode(document: JSONTape) throws(EventDecodingError) -> PushEvent {
        // The schema decides what is an event (README, "Dead letters"); what follows only reads it.
        let event = document.withRoot { root -> Result<PushEvent?, EventDecodingError> in
            PushEventSchema.checked(root).map { read($0, document: document) }
        }
        guard let event = try event.get() else {
            // The schema and these reads disagree: a bug, and the record goes to the dead-letter topic
            // rather than anywhere else.
            throw violation("the event passed the input schema but could not be read; this is a bug in apns-worker")
        }
        return event
    }

    /// The most channels one event may name (schemas/push-request.schema.json).
    static let maximumChannels = 100

    /// The event whose members the input schema accepted: id, type and app are non-empty strings, and
    /// occurred_at is absent or a time it parsed. Nil for members that break any of that (never, after the
    /// schema). Devices and channels are read from the document when asked for (`PushEvent.devices`).
    static func read(_ members: EventMembers, document: JSONTape) -> PushEvent? {
        guard let id = nonEmptyString(members.id), let type = nonEmptyString(members.type),
            let app = nonEmptyString(members.app), (members.occurredAt == nil) == (members.occurredAtSeconds == nil)
        else { return nil }
        return PushEvent(id: id, type: type, occurredAt: members.occurredAtSeconds, app: app, document: document)
    }

    /// `devices` or `channels` (none when absent): each entry's target (under `key`) and environment,
    /// `development` read as `sandbox`. The device tokens are validated per device later, so one bad token
    /// rejects one request.
    static func targets(_ list: JSONNode?, key: String, isChannel: Bool) -> [EventDevice]? {
        guard let list else { return [] }
        guard list.isArray else { return nil }
        var targets: [EventDevice] = []
        targets.reserveCapacity(list.count)
        for entry in list.elements {
            guard let target = nonEmptyString(entry[key]), let environment = nonEmptyString(entry["environment"])
            else { return nil }
            let named = EventDevice.environment(named: environment)
            targets.append(
                isChannel
                    ? EventDevice(token: "", environment: named, channelID: target)
                    : EventDevice(token: target, environment: named))
        }
        return targets
    }

    static func nonEmptyString(_ value: JSONNode?) -> String? {
        guard let text = value?.stringValue, !text.isEmpty else { return nil }
        return text
    }

    static func violation(_ message: String) -> EventDecodingError {
        EventDecodingError(kind: .schemaViolation, message: message)
    }
}
