// The figures of a run as a table (with h2load's beside them when compared) and as one JSON line.

import Foundation
import JSON

extension BenchSendCommand {
    static func printReport(ours: BenchSendFigures, theirs: H2LoadResult?, rss: [(Int, Int)], firstError: String?) {
        func number(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }
        func row(_ label: String, _ a: String, _ b: String = "", _ ratio: String = "") -> String {
            label.padding(toLength: 26, withPad: " ", startingAt: 0)
                + a.leftPadded(14) + b.leftPadded(14) + ratio.leftPadded(10)
        }
        print(row("", "apns-worker", theirs == nil ? "" : "h2load", theirs == nil ? "" : "ratio"))
        if let theirs {
            let theirCPU = Double(theirs.cpuMicroseconds) / Double(max(1, theirs.succeeded + theirs.failed))
            print(
                row(
                    "notifications/s", number(ours.rate, 0), number(theirs.requestsPerSecond, 0),
                    number(ours.rate / theirs.requestsPerSecond, 2)))
            print(
                row(
                    "CPU µs/notification", number(ours.cpuMicrosecondsPerRequest, 2), number(theirCPU, 2),
                    number(ours.cpuMicrosecondsPerRequest / theirCPU, 2)))
            print(row("p50 latency ms", number(ours.p50Milliseconds, 3), "-"))
            print(row("p99 latency ms", number(ours.p99Milliseconds, 3), "-"))
            print(
                row(
                    "mean / max latency ms", "-",
                    "\(theirs.meanLatencyMilliseconds.map { number($0, 2) } ?? "?")/"
                        + "\(theirs.maximumLatencyMilliseconds.map { number($0, 1) } ?? "?")"))
            print(row("peak RSS MiB", number(ours.peakRSSMiB, 1), number(Double(theirs.peakRSSKiB) / 1024, 1)))
            print(row("failed", String(ours.failures), String(theirs.failed)))
        } else {
            print(row("notifications/s", number(ours.rate, 0)))
            print(row("CPU µs/notification", number(ours.cpuMicrosecondsPerRequest, 2)))
            print(row("p50 latency ms", number(ours.p50Milliseconds, 3)))
            print(row("p99 latency ms", number(ours.p99Milliseconds, 3)))
            print(row("peak RSS MiB", number(ours.peakRSSMiB, 1)))
            print(row("failed", String(ours.failures)))
        }
        if !rss.isEmpty {
            print(
                "RSS MiB by progress: "
                    + rss.map { "\($0.0)%: \(number(Double($0.1) / 1024, 1))" }
                    .joined(separator: ", "))
        }
        if let firstError { print("first failure: \(firstError)") }
    }

    /// The figures as one JSON object on one line; the client layer adds its attempts and retries.
    static func printJSON(
        ours: BenchSendFigures, theirs: H2LoadResult?, run: BenchSendRunResult, rss: [(Int, Int)],
        settings: BenchSendSettings, load: Double
    ) {
        var report = reportJSON(
            ours: ours, theirs: theirs, rss: rss, count: settings.count,
            connections: settings.connections, streams: settings.streams, load: load)
        if settings.layer == "client", case .object(var object) = report {
            object["attempts_total"] = .int(Int64(run.attempts))
            object["retried_notifications"] = .int(Int64(run.retried))
            report = .object(object)
        }
        print(report.compactString)
    }

    static func reportJSON(
        ours: BenchSendFigures, theirs: H2LoadResult?, rss: [(Int, Int)], count: Int, connections: Int,
        streams: Int, load: Double
    ) -> JSONValue {
        var object: JSONObject = [
            "count": .int(Int64(count)), "connections": .int(Int64(connections)), "streams": .int(Int64(streams)),
            "load_average_before": .double(load),
            "notifications_per_second": .double(ours.rate.rounded()),
            "cpu_us_per_notification": .double((ours.cpuMicrosecondsPerRequest * 100).rounded() / 100),
            "p50_ms": .double((ours.p50Milliseconds * 1000).rounded() / 1000),
            "p99_ms": .double((ours.p99Milliseconds * 1000).rounded() / 1000),
            "peak_rss_mib": .double((ours.peakRSSMiB * 10).rounded() / 10),
            "failed": .int(Int64(ours.failures)),
            "rss_kib_by_percent": .object(JSONObject(rss.map { .init(key: String($0.0), value: .int(Int64($0.1))) })),
        ]
        if let theirs {
            let theirCPU = Double(theirs.cpuMicroseconds) / Double(max(1, theirs.succeeded + theirs.failed))
            object["h2load"] = [
                "requests_per_second": .double(theirs.requestsPerSecond),
                "cpu_us_per_request": .double((theirCPU * 100).rounded() / 100),
                "peak_rss_mib": .double((Double(theirs.peakRSSKiB) / 1024 * 10).rounded() / 10),
                "failed": .int(Int64(theirs.failed)),
            ]
            object["throughput_ratio"] = .double((ours.rate / theirs.requestsPerSecond * 1000).rounded() / 1000)
            object["cpu_ratio"] = .double((ours.cpuMicrosecondsPerRequest / theirCPU * 1000).rounded() / 1000)
        }
        return .object(object)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
