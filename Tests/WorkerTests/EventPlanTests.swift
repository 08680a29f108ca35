// An event's plan keeps its pushes once, in order, and each device's delivery finds its push by that order.

import APNs
import Testing

@testable import Worker

@Suite struct EventPlanTests {
    static func push(_ number: Int) throws -> PlannedPush {
        let token = try DeviceToken(String(repeating: String(format: "%02x", number), count: 32))
        return PlannedPush(
            request: APNsRequest(
                deviceToken: token, environment: .production, topic: "com.example.app",
                payload: ["n": .int(Int64(number))]),
            app: "com.example.app", ruleID: "rule-\(number)")
    }

    static func device(_ name: String) -> EventDevice {
        EventDevice(token: name, environment: "production")
    }

    @Test func eachSendFindsItsOwnPushAmongSkipsAndRejections() throws {
        var plan = EventPlan()
        plan.add(.skip(device: Self.device("a"), reason: "no_rule", ruleID: nil, topic: nil, pushType: nil))
        plan.send(try Self.push(1), to: Self.device("b"))
        plan.add(
            .reject(
                device: Self.device("c"), reason: "PayloadTooLarge", detail: "", ruleID: "r", topic: nil,
                pushType: nil))
        plan.send(try Self.push(2), to: Self.device("d"))
        plan.send(try Self.push(3), to: Self.device("e"))
        #expect(plan.pushes.map(\.ruleID) == ["rule-1", "rule-2", "rule-3"])
        #expect(plan.deliveries.count == 5)
        var pairs: [String] = []
        plan.forEachDelivery { delivery, pushIndex in
            switch delivery {
            case .send(let device):
                pairs.append("\(device.token)=\(pushIndex.map { plan.pushes[$0].ruleID } ?? "none")")
            case .skip(let device, _, _, _, _), .reject(let device, _, _, _, _, _):
                pairs.append("\(device.token)=\(pushIndex == nil ? "none" : "unexpected")")
            }
        }
        #expect(pairs == ["a=none", "b=rule-1", "c=none", "d=rule-2", "e=rule-3"])
    }
}
