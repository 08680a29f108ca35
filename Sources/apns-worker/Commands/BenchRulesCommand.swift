// `apns-worker bench rules`: how many events per second one core turns into wire-ready requests
// (match + render + validate + serialize) with a realistic rules file.

import APNs
import Foundation
import JSON
import Platform
import PushRules

struct BenchRulesCommand: Command {
    static let name = "bench rules"
    static let summary = "Measure rules throughput on one core: match, render, validate, serialize."
    static let discussion = """
        Loads the rules (default: examples/rules.yaml) and evaluates a mix of sample events (chat
        messages, mentions, photos, reactions, Live Activity updates, an event no rule matches; two
        devices each) in a loop on one thread, serialising every request as it would go on the wire.
        Build with -c release for meaningful numbers.

        example:
          swift build -c release && .build/release/apns-worker bench rules --seconds 3
        """
    static let options: [OptionSpec] = [
        .value("--rules", "FILE", "The rules file. Default: examples/rules.yaml."),
        .value("--event", "FILE", "Use this one event instead of the built-in mix."),
        .value("--seconds", "N", "How long to run. Default: 3."),
    ]

    static func run(_ arguments: ParsedArguments) async throws -> Int32 {
        let path = arguments.value("--rules") ?? "examples/rules.yaml"
        let rules: RuleSet
        do { rules = try RuleSet.load(contentsOf: path) } catch {
            standardError(
                error.description
                    + (arguments.value("--rules") == nil
                        ? "\n(run from the repository root, or give --rules FILE)" : ""))
            return 1
        }
        let events: [JSONValue]
        if arguments.value("--event") != nil {
            events = [try RulesCommandSupport.loadEvent(arguments)]
        } else {
            events = try sampleEvents.map { try JSONValue(parsing: $0) }
        }
        let seconds = try arguments.integer("--seconds", default: 3, range: 1...60) ?? 3
        let now = Int64(Date().timeIntervalSince1970)
        // The samples are dated now so that their ttl has not run out.
        let stamp = JSONValue.string(ISO8601DateFormatter().string(from: Date()))
        let dated = events.map { event in
            guard case .object(var object) = event, object["occurred_at"] != nil else { return event }
            object["occurred_at"] = stamp
            return .object(object)
        }

        let samples = dated
        // A dedicated thread: this is a CPU loop, not work for the cooperative pool.
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<BenchResult, Never>) in
            do {
                try NamedThread.detached(name: "bench-rules", stackSize: 8 << 20) {
                    continuation.resume(returning: measure(rules: rules, events: samples, now: now, seconds: seconds))
                }
            } catch {
                fatalError("\(error)")
            }
        }
        let perSecond = Double(result.events) / result.elapsed
        print("rules: \(rules.summary)")
        print(
            "events: \(samples.count) kinds, \(result.events) evaluated in "
                + String(format: "%.2f", result.elapsed) + " s on one thread")
        print(
            "requests: \(result.requests) serialised (\(result.bodyBytes / max(1, result.requests)) bytes of "
                + "payload each on average), \(result.skipped) skips, \(result.rejected) rejections")
        let perCPUSecond = Double(result.events) / result.cpuSeconds
        print(
            String(
                format: "throughput: %.0f events/s, %.0f requests/s, %.2f µs per event (wall clock)",
                perSecond, Double(result.requests) / result.elapsed, 1e6 / perSecond))
        print(
            String(
                format: "on-CPU: %.0f events/s, %.2f µs per event (thread CPU time %.2f s of %.2f s wall)",
                perCPUSecond, 1e6 / perCPUSecond, result.cpuSeconds, result.elapsed))
        return 0
    }

    struct BenchResult {
        var events = 0
        var requests = 0
        var skipped = 0
        var rejected = 0
        var bodyBytes = 0
        var elapsed = 0.0
        /// CPU time of the benchmark thread: what the rate would be on a core of its own, even when
        /// other processes share the machine.
        var cpuSeconds = 0.0
    }

    static func threadCPUSeconds() -> Double {
        var spec = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }

    static func measure(rules: RuleSet, events: [JSONValue], now: Int64, seconds: Int) -> BenchResult {
        var result = BenchResult()
        // Warm up caches and lazily initialised state before timing.
        for event in events { _ = rules.evaluate(event, now: now) }
        let clock = ContinuousClock()
        let start = clock.now
        let cpuStart = threadCPUSeconds()
        let deadline = start + .seconds(seconds)
        var index = 0
        while true {
            for _ in 0..<1000 {
                let decisions = rules.evaluate(events[index], now: now)
                index = index + 1 == events.count ? 0 : index + 1
                for decision in decisions.decisions {
                    switch decision {
                    case .send(let push):
                        let wire = push.request.wire(authorization: nil)
                        result.bodyBytes += wire.body.count
                        result.requests += 1
                    case .skip: result.skipped += 1
                    case .reject: result.rejected += 1
                    }
                }
                result.events += 1
            }
            if clock.now >= deadline { break }
        }
        let elapsed = clock.now - start
        result.cpuSeconds = threadCPUSeconds() - cpuStart
        result.elapsed = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return result
    }

    static let devices = """
        [{"token": "8f3c2a1be4d5c6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1", "environment": "production"},
         {"token": "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9", "environment": "sandbox"}]
        """

    /// A mix of events hitting rules early, late and not at all.
    static let sampleEvents: [String] = [
        """
        {"id": "evt-1", "type": "chat.message", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u1", "locale": "fr-CA"}, "devices": \(devices),
         "data": {"sender": {"name": "Ana Lima"}, "text": "Are we still on for lunch tomorrow? I booked the place \
        near the station.", "thread_id": "t7", "message_id": "m42", "unread_count": 3},
         "apns": {"priority": 5}}
        """,
        """
        {"id": "evt-2", "type": "chat.message", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u2", "locale": "en-US"}, "devices": \(devices),
         "data": {"sender": {"name": "Bo"}, "text": "@you can you review this?", "thread_id": "t9",
                  "thread_title": "Design review", "message_id": "m43", "mentions_recipient": true}}
        """,
        """
        {"id": "evt-3", "type": "chat.message", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u3", "locale": "ja-JP"}, "devices": \(devices),
         "data": {"sender": {"name": "佐藤"}, "thread_id": "t1", "message_id": "m44",
                  "attachment": {"kind": "photo", "url": "https://cdn.example.com/p/1.jpg"}}}
        """,
        """
        {"id": "evt-4", "type": "chat.reaction", "occurred_at": "", "app": "com.example.chat",
         "recipient": {"user_id": "u4", "locale": "de"}, "devices": \(devices),
         "data": {"sender": {"name": "Kai"}, "emoji": "👍", "thread_id": "t2", "message_id": "m9"}}
        """,
        """
        {"id": "evt-5", "type": "order.delivery_update", "occurred_at": "", "app": "com.example.shop",
         "recipient": {"user_id": "u5", "locale": "en"}, "devices": \(devices),
         "data": {"order": {"number": "A-1001"}, "status": "out_for_delivery", "eta": "2026-11-29T13:15:00Z",
                  "stops_away": 3}}
        """,
        """
        {"id": "evt-6", "type": "social.story_liked", "occurred_at": "", "app": "com.example.social",
         "recipient": {"user_id": "u6", "locale": "fr"}, "devices": \(devices),
         "data": {"actor": {"name": "Léa"}, "like_count": 24, "story_id": "s5"}}
        """,
        """
        {"id": "evt-7", "type": "user.profile_viewed", "occurred_at": "", "app": "com.example.social",
         "recipient": {"user_id": "u7"}, "devices": \(devices), "data": {}}
        """,
    ]
}
