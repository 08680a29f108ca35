// The input event, decoded and checked against the input schema (schemas/push-request.schema.json)
// before any rule sees it. A record that fails here goes to the dead-letter topic, never dropped.

import APNs
public import JSON

/// One device an event addresses, as the event gave it (the token is validated per device later,
/// so one bad token rejects one request, not the whole event).
public struct EventDevice: Sendable, Hashable {
    public var token: String
    public var environment: String
    /// Set for a broadcast channel of the event's `channels` (then `token` is empty).
    public var channelID: String? = nil
}

/// A decoded notification event.
public struct PushEvent: Sendable {
    public var id: String
    public var type: String
    /// Seconds since 1970 from `occurred_at`; nil when the event did not say.
    public var occurredAt: Double?
    public var app: String?
    public var devices: [EventDevice]
    /// The broadcast channels of `channels`, each with `channelID` set.
    public var channels: [EventDevice] = []
    /// The whole event as parsed, which rules match against and templates read from.
    public var document: JSONValue
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
        let document: JSONValue
        do {
            // A member named twice is refused: the producer and this worker could read it two ways.
            document = try JSONValue(
                parsing: bytes, options: JSONParsingOptions(allowsDuplicateKeys: false, maximumDepth: 64))
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

    public static func decode(document: JSONValue) throws(EventDecodingError) -> PushEvent {
        // The schema decides what is an event (README, "Dead letters"); what follows only reads it.
        if let problem = PushEventSchema.violation(in: document) { throw violation(problem) }
        guard case .object(let object) = document else {
            throw violation("the event must be a JSON object, found \(document.typeName)")
        }
        let id = try requiredString(object, "id")
        let type = try requiredString(object, "type")
        // The schema has checked occurred_at (absent, or an RFC 3339 timestamp that parses): only its time
        // is kept, read where it lies.
        let occurredAt =
            object.withMember("occurred_at") { value -> Double? in
                guard case .string(let text) = value else { return nil }
                return RFC3339.parse(text)
            } ?? nil
        var app: String?
        if let value = object["app"], !value.isNull {
            guard let text = value.stringValue, !text.isEmpty else { throw violation("app must be a non-empty string") }
            app = text
        }
        let channels = try decodeChannels(object["channels"])
        let devicesValue: JSONValue
        if let given = object["devices"] {
            devicesValue = given
        } else if !channels.isEmpty {
            devicesValue = .array([])
        } else {
            throw violation("devices is missing (an event names devices, channels, or both)")
        }
        guard case .array(let deviceValues) = devicesValue else {
            throw violation("devices must be an array, found \(devicesValue.typeName)")
        }
        guard !deviceValues.isEmpty || !channels.isEmpty else {
            throw violation("devices is empty; an event needs at least one device or channel")
        }
        guard deviceValues.count <= maximumDevices else {
            throw violation("devices has \(deviceValues.count) entries; at most \(maximumDevices) per event")
        }
        var devices: [EventDevice] = []
        devices.reserveCapacity(deviceValues.count)
        for (index, deviceValue) in deviceValues.enumerated() {
            guard case .object(let device) = deviceValue else {
                throw violation("devices[\(index)] must be an object, found \(deviceValue.typeName)")
            }
            guard let token = device["token"]?.stringValue, !token.isEmpty else {
                throw violation("devices[\(index)].token must be a non-empty string")
            }
            let environment = device["environment"]?.stringValue ?? "production"
            guard environment == "production" || environment == "sandbox" || environment == "development" else {
                throw violation(
                    "devices[\(index)].environment must be production or sandbox, found '\(environment.prefix(32))'")
            }
            devices.append(
                EventDevice(token: token, environment: environment == "development" ? "sandbox" : environment))
        }
        return PushEvent(
            id: id, type: type, occurredAt: occurredAt, app: app, devices: devices, channels: channels,
            document: document)
    }

    /// The most channels one event may name (schemas/push-request.schema.json).
    static let maximumChannels = 100

    /// `channels: [{id, environment}]`: broadcast channels (iOS 18 Live Activities) beside the devices.
    static func decodeChannels(_ value: JSONValue?) throws(EventDecodingError) -> [EventDevice] {
        guard let value, !value.isNull else { return [] }
        guard case .array(let items) = value else {
            throw violation("channels must be an array, found \(value.typeName)")
        }
        guard !items.isEmpty else { throw violation("channels is empty; leave it out or name a channel") }
        guard items.count <= maximumChannels else {
            throw violation("channels has \(items.count) entries; at most \(maximumChannels) per event")
        }
        var channels: [EventDevice] = []
        for (index, item) in items.enumerated() {
            guard case .object(let channel) = item else {
                throw violation("channels[\(index)] must be an object, found \(item.typeName)")
            }
            guard let text = channel["id"]?.stringValue, let id = try? ChannelID(text), id.value == text else {
                throw violation("channels[\(index)].id must be a channel id (base64, as `channels create` printed it)")
            }
            guard let environment = channel["environment"]?.stringValue,
                environment == "production" || environment == "sandbox" || environment == "development"
            else {
                throw violation("channels[\(index)].environment must be production or sandbox")
            }
            channels.append(
                EventDevice(
                    token: "", environment: environment == "development" ? "sandbox" : environment, channelID: id.value)
            )
        }
        return channels
    }

    static func requiredString(_ object: JSONObject, _ key: String) throws(EventDecodingError) -> String {
        guard let value = object[key] else { throw violation("\(key) is missing") }
        guard let text = value.stringValue else { throw violation("\(key) must be a string, found \(value.typeName)") }
        guard !text.isEmpty else { throw violation("\(key) must not be empty") }
        return text
    }

    static func violation(_ message: String) -> EventDecodingError {
        EventDecodingError(kind: .schemaViolation, message: message)
    }
}
