// `apns-worker bench rules`: how many events per second one core turns into wire-ready requests
// (match + render + validate + serialize) with a realistic rules file; with `--decode`, from each event's
// bytes, as the worker reads them (parse + input schema + the rest).

import APNs
import Foundation
import JSON
import Platform
import PushRules
import Worker
import WorkerDev

struct BenchRulesCommand: Command {
    static let name = "bench rules"
    static let summary = "Measure rules throughput on one core: match, render, validate, serialize."
    static let discussion = """
        Loads the rules (default: examples/rules.yaml) and evaluates a mix of sample events (chat
        messages, mentions, photos, reactions, Live Activity updates, an event no rule matches; two
        devices each) in a loop on one thread, serialising every request as it would go on the wire.
        Build with -c release for meaningful numbers.

        With --decode, each event starts as its record's bytes and is decoded as the worker decodes
        it (strict JSON with no member named twice, then the input schema) before the rules see it:
        the CPU one record costs an event loop before its first request is sent. One thread, so the
        figure moves less with the machine than `bench pipeline`'s; compare builds with it in
        alternated runs.

        example:
          swift build -c release && .build/release/apns-worker bench rules --seconds 3 --decode
        """
    static let options: [OptionSpec] = [
        .value("--rules", "FILE", "The rules file. Default: examples/rules.yaml."),
        .value("--event", "FILE", "Use this one event instead of the built-in mix."),
        .value("--seconds", "N", "How long to run. Default: 3."),
        .flag("--decode", "Decode each event from its bytes first, as the worker does (parse and input schema)."),
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
        let decoding = arguments.has("--decode")
        if decoding {
            // Checked once here, so that the loop measures decoding, not a sample the schema refuses.
            for event in samples {
                do throws(EventDecodingError) { _ = try PushEventDecoder.decode(event.compactBytes) } catch {
                    standardError("the event cannot be decoded as the worker decodes events: \(error)")
                    return 1
                }
            }
        }
        // A dedicated thread: this is a CPU loop, not work for the cooperative pool.
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<BenchResult, Never>) in
            do {
                try NamedThread.detached(name: "bench-rules", stackSize: 8 << 20) {
                    let measured =
                        decoding
                        ? measure(rules: rules, records: samples.map(\.compactBytes), now: now, seconds: seconds)
                        : measure(rules: rules, events: samples, now: now, seconds: seconds)
                    continuation.resume(returning: measured)
                }
            } catch {
                fatalError("\(error)")
            }
        }
        let perSecond = Double(result.events) / result.elapsed
        print("rules: \(rules.summary)")
        print(
            "events: \(samples.count) kinds, \(result.events) \(decoding ? "decoded from their bytes and " : "")"
                + "evaluated in " + String(format: "%.2f", result.elapsed) + " s on one thread")
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
        // Parsed before timing, as the worker's rules get them: tapes.
        let tapes = events.map { JSONTape($0) }
        return measure(count: tapes.count, seconds: seconds) { index, result in
            result.add(rules.evaluate(tapes[index], now: now))
        }
    }

    /// As the worker reads a record: its bytes decoded (JSON, then the input schema), then the rules.
    static func measure(rules: RuleSet, records: [[UInt8]], now: Int64, seconds: Int) -> BenchResult {
        measure(count: records.count, seconds: seconds) { index, result in
            // Every sample was decoded once before timing; none fails here.
            guard let event = try? PushEventDecoder.decode(records[index]) else { return }
            result.add(rules.evaluate(event.document, now: now))
        }
    }

    /// Runs `evaluate` over the samples `0..<count` in turn for `seconds`, after one warm-up round.
    static func measure(
        count: Int, seconds: Int, _ evaluate: (_ index: Int, _ result: inout BenchResult) -> Void
    ) -> BenchResult {
        var warmUp = BenchResult()
        // Warm up caches and lazily initialised state before timing.
        for index in 0..<count { evaluate(index, &warmUp) }
        var result = BenchResult()
        let clock = ContinuousClock()
        let start = clock.now
        let cpuStart = threadCPUSeconds()
        let deadline = start + .seconds(seconds)
        var index = 0
        while true {
            for _ in 0..<1000 {
                evaluate(index, &result)
                index = index + 1 == count ? 0 : index + 1
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

extension BenchRulesCommand.BenchResult {
    /// Counts an event's decisions, serialising every request as it would go on the wire.
    mutating func add(_ decisions: EventDecisions) {
        for decision in decisions.decisions {
            switch decision {
            case .send(let push):
                let wire = push.request.wire(authorization: nil)
                bodyBytes += wire.body.count
                requests += 1
            case .skip: skipped += 1
            case .reject: rejected += 1
            }
        }
    }
}
