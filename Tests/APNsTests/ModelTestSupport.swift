// Shared values for the request-model tests.

import APNs
import JSON

enum Sample {
    /// A 32-byte token in canonical form.
    static let tokenHex = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
    static var token: DeviceToken { try! DeviceToken(tokenHex) }
    static let apnsID = try! APNsID(parsing: "123e4567-e89b-42d3-a456-426614174000")
    static let mdmTopic = "com.apple.mgmt.External.0c4a3c4b-6f25-4c1d-9f0e-3c8a5b3e2d11"

    static func topic(for type: PushType) -> String {
        type == .mdm ? mdmTopic : type.topic(forBundle: "com.example.app")
    }

    static func request(
        pushType: PushType = .alert, topic: String? = nil, priority: APNsPriority? = nil,
        expiration: APNsExpiration = .none, collapseID: CollapseID? = nil,
        payload: JSONValue = ["aps": ["alert": "hi"]]
    ) -> APNsRequest {
        APNsRequest(
            deviceToken: token, environment: .sandbox, topic: topic ?? Sample.topic(for: pushType),
            pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID,
            payload: payload)
    }

    /// `{"aps":{"alert":"<text>"}}` whose compact UTF-8 form is exactly `byteCount` bytes: as many
    /// `filler` characters as fit, then ASCII to make up the rest.
    static func alertPayload(byteCount: Int, filler: Character) -> JSONValue {
        let overhead = #"{"aps":{"alert":""}}"#.utf8.count
        let fillerBytes = String(filler).utf8.count
        let room = byteCount - overhead
        let text =
            String(repeating: String(filler), count: room / fillerBytes)
            + String(repeating: "a", count: room % fillerBytes)
        let payload: JSONValue = ["aps": ["alert": .string(text)]]
        precondition(payload.compactByteCount == byteCount)
        return payload
    }

    /// Problems as `code@field` strings, for compact comparisons.
    static func summary(_ problems: [APNsRequestProblem]) -> [String] {
        problems.map { "\($0.code)@\($0.field)" }
    }
}

/// The error a throwing call threw, or nil.
func captured<T>(_ body: () throws -> T) -> APNsRequestError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error as? APNsRequestError
    }
}
