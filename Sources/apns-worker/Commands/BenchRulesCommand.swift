// `apns-worker bench rules`: how many events per second one core turns into wire-ready requests
// (match + render + validate + serialize) with a realistic rules file.

import APNs
import Foundation
import JSON
import Platform
import PushRules
import WorkerDev

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
            events = try RulesBenchEvents.all.map { try JSONValue(parsing: $0) }
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
}
