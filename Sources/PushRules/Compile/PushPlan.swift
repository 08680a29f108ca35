// A rule's notification, compiled: the header values fixed at load, the payload as a template tree
// (and as a payload program), and what may be overridden or shortened. Rendering one event goes
// template → JSON → overrides → size fitting; each request is then checked by the APNs request model
// before it is handed out. When no override changes the payload and it fits, the payload program
// writes its bytes directly instead, and the checks' answer is remembered per payload shape.

import APNs
import JSON
import Synchronization

/// How to build the push of one rule. A class: it is large, and evaluation passes it around a lot.
final class PushPlan: Sendable {
    let pushType: PushType
    /// The bundle id (the push type's suffix is added); nil when `topic` is given.
    let app: Template?
    /// A full topic, used as given (required for mdm).
    let topic: Template?
    let priority: APNsPriority
    /// Seconds after the event's time for apns-expiration; 0 means "try once"; nil sends no header.
    let ttl: Int64?
    let collapseID: Template?
    /// The whole payload, an object tree.
    let payload: ValueTemplate
    let acceptedOverrides: Set<OverrideField>
    /// The `aps` keys this push type carries; overrides of other keys do not apply.
    let apsKeys: Set<String>
    let shorten: [ShortenPath]
    let readsDevice: Bool
    /// True when some template reads the locale, so the event's locale chain must be resolved.
    let readsLocale: Bool
    /// The payload compiled to bytes and leaves; nil leaves every payload to the value tree.
    let payloadProgram: PayloadProgram?
    /// The payload shapes (`PayloadProgram.Output.shape`, with bit 60 set for a `web.` topic) in which
    /// the payload checks found nothing.
    private let cleanShapes = Mutex<[UInt64]>([])
    /// Far more than the shapes one rule's payloads take in practice; beyond it, a new shape is checked
    /// on its value tree each time.
    static let cleanShapeLimit = 64

    init(
        pushType: PushType, app: Template?, topic: Template?, priority: APNsPriority, ttl: Int64?,
        collapseID: Template?, payload: ValueTemplate, acceptedOverrides: Set<OverrideField>, apsKeys: Set<String>,
        shorten: [ShortenPath], readsDevice: Bool, readsLocale: Bool
    ) {
        self.pushType = pushType
        self.app = app
        self.topic = topic
        self.priority = priority
        self.ttl = ttl
        self.collapseID = collapseID
        self.payload = payload
        self.acceptedOverrides = acceptedOverrides
        self.apsKeys = apsKeys
        self.shorten = shorten
        self.readsDevice = readsDevice
        self.readsLocale = readsLocale
        self.payloadProgram = PayloadProgram(payload)
    }

    /// The parts of a request that do not depend on the device token.
    struct Rendered {
        var topic: String
        var priority: APNsPriority
        var expiration: APNsExpiration
        var collapseID: CollapseID?
        var payload: RenderedPayload
        var notes: [String]
    }

    enum RenderedPayload {
        case value(JSONValue)
        /// The payload program's bytes: no override changed the payload, and it fits the limit.
        case program(PayloadProgram.Output)
    }

    enum Failure: Error {
        case reject(RejectionReason, [String])
        case skip(SkipReason, String)
    }

    func render(
        _ context: RenderContext, overrides: EventOverrides, now: Int64, usingProgram: Bool = true
    ) -> Result<Rendered, Failure> {
        var notes: [String] = []
        var problems: [String] = []

        var topicText = ""
        do {
            if let topic {
                topicText = try text(topic.render(context), field: "topic")
            } else if let app {
                topicText = pushType.topic(forBundle: try text(app.render(context), field: "app"))
            }
        } catch {
            problems.append(error.message)
        }

        var payloadValue = JSONValue.object(JSONObject())
        var programOutput: PayloadProgram.Output?
        if usingProgram, let payloadProgram, !overridesChangePayload(overrides),
            let output = payloadProgram.render(context),
            output.bytes.count <= pushType.payloadLimit
        {
            programOutput = output
        } else {
            do { payloadValue = try payload.render(context) } catch { problems.append(error.message) }
        }

        var collapseText: String?
        if let collapseID {
            do {
                let value = try collapseID.render(context)
                if !value.isNull { collapseText = try text(value, field: "collapse_id") }
            } catch {
                problems.append(error.message)
            }
        }

        var expirationSeconds: Int64?
        if let ttl {
            if ttl == 0 {
                expirationSeconds = 0
            } else {
                switch context.eventTime {
                case .success(let time): expirationSeconds = time + ttl
                case .failure(let error): problems.append("ttl: \(error.message)")
                }
            }
        }
        if !problems.isEmpty { return .failure(.reject(.templateError, problems)) }

        var priority = self.priority
        if !overrides.isEmpty {
            var invalid: [String] = []
            for field in OverrideField.allCases {
                let present = overrides.values[field] != nil || overrides.invalid[field] != nil
                guard present else { continue }
                guard acceptedOverrides.contains(field) else {
                    notes.append(
                        "event override apns.\(field.rawValue) ignored: the rule does not accept it "
                            + "(accept_overrides)")
                    continue
                }
                if let problem = overrides.invalid[field] {
                    invalid.append(problem)
                    continue
                }
                let value = overrides.values[field]!
                switch field {
                case .priority: priority = (try? APNsPriority(Int(value.intValue ?? 10))) ?? priority
                case .expiration: expirationSeconds = value.intValue
                case .collapse_id: collapseText = value.stringValue
                default:
                    guard let key = field.apsKey, apsKeys.contains(key) else {
                        notes.append(
                            "event override apns.\(field.rawValue) ignored: \(pushType) pushes do not carry it")
                        continue
                    }
                    payloadValue = Self.setting(key, to: value, inAPSOf: payloadValue)
                }
            }
            for key in overrides.unknown {
                notes.append(
                    "event override apns.\(key) ignored: not an overridable field (overridable: "
                        + OverrideField.allCases.map(\.rawValue).joined(separator: ", ") + ")")
            }
            if !invalid.isEmpty { return .failure(.reject(.invalidOverride, invalid)) }
        }

        var expiration = APNsExpiration.none
        if let seconds = expirationSeconds {
            if seconds != 0 && seconds <= now {
                return .failure(
                    .skip(
                        .expired,
                        "the notification expired at \(Timestamp.rfc3339(unixSeconds: seconds)) "
                            + "(\(seconds)), before \(Timestamp.rfc3339(unixSeconds: now))"))
            }
            expiration = APNsExpiration(unixSeconds: seconds)
        }

        var collapse: CollapseID?
        if let collapseText {
            do { collapse = try CollapseID(collapseText) } catch {
                return .failure(.reject(.invalidRequest, ["collapse_id: \(error.message)"]))
            }
        }

        return .success(
            Rendered(
                topic: topicText, priority: priority, expiration: expiration, collapseID: collapse,
                payload: programOutput.map { .program($0) } ?? .value(payloadValue), notes: notes))
    }

    /// Whether an override of the event applies to the payload (as `render` applies them).
    func overridesChangePayload(_ overrides: EventOverrides) -> Bool {
        for field in overrides.values.keys where acceptedOverrides.contains(field) {
            if let key = field.apsKey, apsKeys.contains(key) { return true }
        }
        return false
    }

    /// Whether the payload checks found nothing in a payload of this shape before (then they find
    /// nothing in this one: the checks see no more than the shape).
    func isCleanShape(_ shape: UInt64) -> Bool {
        cleanShapes.withLock { $0.contains(shape) }
    }

    /// How many shapes are known clean (for tests: payloads of those shapes are sent from their bytes).
    var cleanShapeCount: Int { cleanShapes.withLock { $0.count } }

    func rememberCleanShape(_ shape: UInt64) {
        cleanShapes.withLock { shapes in
            if shapes.count < Self.cleanShapeLimit && !shapes.contains(shape) { shapes.append(shape) }
        }
    }

    /// Shortens the payload to the push type's limit, or says why it cannot be done.
    func fit(_ payload: JSONValue) -> Result<PayloadFitting.Fitted, Failure> {
        var finalSize = 0
        guard
            let fitted = PayloadFitting.fit(
                payload, limit: pushType.payloadLimit, paths: shorten, finalByteCount: &finalSize)
        else {
            let why =
                shorten.isEmpty
                ? "the rule names no field to shorten (shorten:)"
                : "shortening " + shorten.map(\.name).joined(separator: ", ") + " cannot make it fit"
            return .failure(
                .reject(
                    .payloadTooLarge,
                    [
                        "the payload is \(finalSize) bytes, over the \(pushType.payloadLimit)-byte limit for "
                            + "\(pushType) pushes; \(why)"
                    ]))
        }
        return .success(fitted)
    }

    private func text(_ value: JSONValue, field: String) throws(TemplateRenderError) -> String {
        switch value {
        case .string(let string): return string
        case .int, .double, .bool: return value.compactString
        default: throw TemplateRenderError("\(field) must be text, but the template gave \(value.typeName)")
        }
    }

    static func setting(_ key: String, to value: JSONValue, inAPSOf payload: JSONValue) -> JSONValue {
        guard case .object(var root) = payload else { return payload }
        var aps = root["aps"]?.objectValue ?? JSONObject()
        aps[key] = value
        root["aps"] = .object(aps)
        return .object(root)
    }
}
