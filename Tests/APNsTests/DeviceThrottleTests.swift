// The pacing of devices APNs answered 429 TooManyRequests for: the AIMD arithmetic on a fixed clock, then
// a storm to one device against the simulator's per-device limit, beside pushes to other devices.

import APNsSimulator
import Foundation
import HTTP2
import Testing

@testable import APNs

@Suite("Device throttle (429 TooManyRequests)")
struct DeviceThrottleTests {
    static let millisecond: UInt64 = 1_000_000
    let hot = "aa"

    @Test func aDeviceAPNsNeverThrottledIsNotPaced() {
        let throttle = DeviceThrottle()
        #expect(!throttle.isThrottled(hot))
        #expect(throttle.wait(for: hot, now: 0) == .zero)
        throttle.delivered(hot)
        #expect(throttle.throttledDevices == 0)
    }

    @Test func aRefusalSpacesEveryLaterPushToTheDeviceAtItsRate() {
        let throttle = DeviceThrottle()
        throttle.refused(hot, retryAfter: nil, now: 0)
        #expect(throttle.isThrottled(hot) && !throttle.isThrottled("bb"))
        // 10 a second: one slot every 100 ms, the first one interval after the refusal.
        #expect(throttle.wait(for: hot, now: 0) == .milliseconds(100))
        #expect(throttle.wait(for: hot, now: 0) == .milliseconds(200))
        #expect(throttle.wait(for: hot, now: 250 * Self.millisecond) == .milliseconds(50))
        #expect(throttle.wait(for: "bb", now: 0) == .zero)
    }

    @Test func eachFurtherRefusalHalvesTheRateAndRetryAfterIsHonoured() {
        let throttle = DeviceThrottle()
        throttle.refused(hot, retryAfter: nil, now: 0)
        throttle.refused(hot, retryAfter: nil, now: 0)  // 5 a second
        #expect(throttle.wait(for: hot, now: 0) == .milliseconds(200))
        #expect(throttle.wait(for: hot, now: 0) == .milliseconds(400))
        throttle.refused(hot, retryAfter: .seconds(5), now: 0)
        #expect(throttle.wait(for: hot, now: 0) == .seconds(5))
        for _ in 0..<20 { throttle.refused(hot, retryAfter: nil, now: 0) }
        // Never slower than one a minute.
        let late = throttle.wait(for: hot, now: 3_600_000 * Self.millisecond)
        let later = throttle.wait(for: hot, now: 3_600_000 * Self.millisecond)
        #expect(later - late == .seconds(60))
    }

    @Test func refusalsOfPushesSentBeforeTheLastDecreaseDoNotHalveTheRateAgain() {
        let throttle = DeviceThrottle()
        // A burst sent at 0 ms: its first 429 arrives at 10 ms, the other 49 right after.
        throttle.refused(hot, retryAfter: nil, sentAt: 0, now: 10 * Self.millisecond)
        for _ in 0..<49 { throttle.refused(hot, retryAfter: nil, sentAt: 0, now: 11 * Self.millisecond) }
        let first = throttle.wait(for: hot, now: 20 * Self.millisecond)
        let second = throttle.wait(for: hot, now: 20 * Self.millisecond)
        #expect(second - first == .milliseconds(100), "still 10 a second")
        // A push sent after that decrease and refused halves it.
        throttle.refused(hot, retryAfter: nil, sentAt: 30 * Self.millisecond, now: 40 * Self.millisecond)
        let third = throttle.wait(for: hot, now: 40 * Self.millisecond)
        let fourth = throttle.wait(for: hot, now: 40 * Self.millisecond)
        #expect(fourth - third == .milliseconds(200))
    }

    @Test func aRateCutVoidsTheSlotsTakenAtTheOldRate() {
        let throttle = DeviceThrottle()
        throttle.refused(hot, retryAfter: nil, now: 0)
        let early = throttle.reserveSlot(for: hot, now: 0)
        let late = throttle.reserveSlot(for: hot, now: 0)
        #expect(throttle.isCurrent(early) && throttle.isCurrent(late))
        // A push sent at 100 ms (the early slot) is refused: the rate halves, and the late slot, taken at the
        // old rate, is void; taken again, it is one new interval (200 ms) from the refusal.
        throttle.refused(hot, retryAfter: nil, sentAt: 100 * Self.millisecond, now: 110 * Self.millisecond)
        #expect(!throttle.isCurrent(late))
        #expect(throttle.reserveSlot(for: hot, now: 110 * Self.millisecond).delay == .milliseconds(200))
        #expect(throttle.isCurrent(throttle.reserveSlot(for: "bb", now: 0)), "a device not paced")
    }

    @Test func deliveriesSpeedTheDeviceUpUntilItIsForgotten() {
        let throttle = DeviceThrottle()
        throttle.refused(hot, retryAfter: nil, now: 0)
        for _ in 0..<89 { throttle.delivered(hot) }  // 10 + 89 = 99 a second
        #expect(throttle.isThrottled(hot))
        throttle.delivered(hot)
        #expect(!throttle.isThrottled(hot) && throttle.throttledDevices == 0)
        #expect(throttle.wait(for: hot, now: 0) == .zero)
    }

    @Test func memoryIsBoundedByForgettingTheIdlestDevice() {
        var configuration = DeviceThrottle.Configuration()
        configuration.capacity = 2
        let throttle = DeviceThrottle(configuration: configuration)
        throttle.refused("a1", retryAfter: nil, now: 0)
        throttle.refused("b2", retryAfter: nil, now: 10)
        _ = throttle.reserveSlot(for: "a1", now: 20)  // a1 used more recently than b2
        throttle.refused("c3", retryAfter: nil, now: 30)
        #expect(throttle.throttledDevices == 2)
        #expect(throttle.isThrottled("a1") && throttle.isThrottled("c3") && !throttle.isThrottled("b2"))
    }
}

extension ClientSendTests {
    /// 80 pushes at once to one device the simulator allows 5 requests per 300 ms, and 80 to other
    /// devices. Without pacing each refused push would retry on its own back-off while the rest kept
    /// coming: hundreds of 429s, and pushes failing once their attempts ran out. Paced, every push is
    /// delivered, the other devices' pushes are untouched (first attempt, the breaker closed), and
    /// after the first burst's refusals few more 429s come.
    @Test func aStormToOneThrottledDeviceIsPacedAndEveryPushIsDelivered() async throws {
        let simulator = try makeSimulator { configuration in
            configuration.faults.deviceLimit = DeviceRequestLimit(requests: 5, windowMilliseconds: 300)
        }
        let client = try makeClient(simulator)
        let policy = RetryPolicy(
            maximumAttempts: 5, maximumTotalTime: .seconds(60),
            backoff: ExponentialBackoff(initial: .milliseconds(50), maximum: .seconds(1)))
        let hotCount = 80
        let others = try (0..<80).map { index in
            try DeviceToken(String(format: "%064x", 0xbeef_0000 + index))
        }
        let hotRequest = try request()
        let results = await withTaskGroup(of: (Bool, DeliveryResult).self) { group in
            for _ in 0..<hotCount {
                var push = hotRequest
                push.apnsID = .random()
                group.addTask { (true, await client.send(push, policy: policy)) }
            }
            for token in others {
                var push = hotRequest
                push.target = .device(token)
                push.apnsID = .random()
                group.addTask { (false, await client.send(push, policy: policy)) }
            }
            var all: [(Bool, DeliveryResult)] = []
            for await result in group { all.append(result) }
            return all
        }
        let hot = results.filter(\.0).map(\.1)
        let cold = results.filter { !$0.0 }.map(\.1)
        #expect(hot.count == hotCount && cold.count == others.count)
        #expect(
            hot.allSatisfy { $0.status == .delivered },
            "\(hot.filter { $0.status != .delivered }.map(\.summary).prefix(3))")
        #expect(cold.allSatisfy { $0.status == .delivered && $0.attempts.count == 1 })
        #expect(client.breaker(for: .sandbox).isClosed)
        let refusals = simulator.stats.responses[ResponseKind(status: 429, reason: "TooManyRequests")] ?? 0
        // The first burst: up to every hot push at once, 5 of them let through. Paced after that.
        #expect(refusals >= hotCount - 5)
        #expect(refusals <= hotCount + hotCount / 2, "429s after the first burst: \(refusals - (hotCount - 5))")
        await client.shutdown()
        simulator.stop()
    }
}

extension DeviceThrottle {
    /// The wait of the next slot for `token`, taking it.
    fileprivate func wait(for token: String, now: UInt64) -> Duration { reserveSlot(for: token, now: now).delay }
}
