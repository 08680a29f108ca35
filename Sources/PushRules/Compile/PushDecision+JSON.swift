// Decisions as JSON objects, one per line in `apns-worker rules render`: a request exactly as it
// would be sent (method, URL, headers, body), or the skip / rejection and why.

import APNs
public import JSON

extension PushDecision {
    /// The decision as one JSON object.
    ///
    /// - Parameter includingAPNsID: include the `apns-id` header. The sender replaces it with a fresh
    ///   id per attempt, so tests that compare output leave it out.
    public func json(includingAPNsID: Bool = true) -> JSONValue {
        var object = JSONObject()
        if let device {
            object.appendUnchecked(device.channelID == nil ? "device" : "channel", .int(Int64(device.index)))
        }
        object.appendUnchecked("rule", ruleID.map { .string($0) } ?? .null)
        switch self {
        case .send(let push):
            let wire = push.request.wire(authorization: nil)
            object.appendUnchecked("status", "send")
            object.appendUnchecked("method", .string(wire.method))
            object.appendUnchecked("url", .string(wire.url))
            var headers = JSONObject()
            for field in wire.headers
            where includingAPNsID || (field.name != "apns-id" && field.name != "apns-request-id") {
                headers.appendUnchecked(field.name, .string(field.value))
            }
            object.appendUnchecked("headers", .object(headers))
            object.appendUnchecked("body", push.request.payload)
            if !push.notes.isEmpty { object.appendUnchecked("notes", .array(push.notes.map { .string($0) })) }
        case .skip(let skip):
            object.appendUnchecked("status", "skipped")
            object.appendUnchecked("reason", .string(skip.reason.rawValue))
            object.appendUnchecked("detail", .string(skip.detail))
        case .reject(let rejection):
            object.appendUnchecked("status", "rejected")
            object.appendUnchecked("reason", .string(rejection.reason.rawValue))
            object.appendUnchecked("problems", .array(rejection.problems.map { .string($0) }))
        }
        return .object(object)
    }
}
