// The rules check each request with the request model's own checks, remembering the header part per
// rule; the answer must be exactly what APNsRequest.validate() says, for good and bad requests alike.
import APNs
import Testing
@testable import PushRules

@Suite struct RequestValidationTests {
    static func request(topic: String = "com.example.app", pushType: PushType = .alert, priority: Int = 10,
                        expiration: APNsExpiration = .none, payload: JSONValue = ["aps": ["alert": "hi"]])
        -> APNsRequest
    {
        APNsRequest(
            deviceToken: try! DeviceToken(String(repeating: "ab", count: 32)), environment: .production,
            topic: topic, pushType: pushType, priority: try! APNsPriority(priority), expiration: expiration,
            payload: payload)
    }

    static let cases: [APNsRequest] = [
        request(),
        request(topic: "com.example app"),
        request(topic: "com.example.app.voip"),
        request(topic: ""),
        request(pushType: .voip, priority: 5, payload: ["call": 1]),
        request(topic: "com.example.app.voip", pushType: .voip, payload: ["call": 1]),
        request(pushType: .background, priority: 10, payload: ["aps": ["content-available": 1, "badge": 1]]),
        request(pushType: .background, priority: 5, payload: ["aps": [:]]),
        request(topic: "com.example.app.push-type.liveactivity", pushType: .liveactivity,
                payload: ["aps": ["event": "start"]]),
        request(expiration: .at(-5)),
        request(expiration: .at(1_795_953_600_000)),
        request(expiration: .at(1_795_953_600)),
        request(expiration: .immediately),
        request(payload: ["aps": ["alert": .string(String(repeating: "x", count: 5000)), "badge": "3"]]),
        request(payload: ["aps": ["sound": ["volume": 2], "custom": 1]]),
        request(pushType: .mdm, payload: ["mdm": "x"]),
        request(topic: "com.apple.mgmt.External.1", pushType: .mdm, payload: ["mdm": "x"]),
    ]

    @Test func agreesWithTheRequestModelFirstTimeAndFromMemory() {
        let validation = RequestValidation()
        for pass in 1...2 {
            for request in Self.cases {
                #expect(validation.problems(request).map(\.description) == request.validate().map(\.description),
                        "pass \(pass): \(request.topic) \(request.pushType) \(request.expiration)")
            }
        }
    }
}
