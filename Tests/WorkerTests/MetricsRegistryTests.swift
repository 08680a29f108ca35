// The metrics registry's text exposition (format 0.0.4): families, escaping and number formatting.

import Testing

@testable import Worker

@Suite struct MetricsRegistryTests {
    @Test func exposesCountersGaugesAndHistogramsInTextFormat004() throws {
        let registry = MetricsRegistry()
        let sent = try registry.counter("demo_sent_total", help: "Sent.", labelNames: ["topic"])
        let depth = try registry.gauge("demo_queue_depth", help: "Depth.")
        let latency = try registry.histogram(
            "demo_latency_seconds", help: "Latency.", labelNames: ["env"], buckets: [0.1, 1, 2.5])
        sent.labels("b").increment(by: 3)
        sent.labels("a").increment()
        depth.labels().set(-2.5)
        let production = latency.labels("production")
        for value in [0.05, 0.1, 0.7, 3.0] { production.observe(value) }

        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(
            text == """
                # HELP demo_sent_total Sent.
                # TYPE demo_sent_total counter
                demo_sent_total{topic="a"} 1
                demo_sent_total{topic="b"} 3
                # HELP demo_queue_depth Depth.
                # TYPE demo_queue_depth gauge
                demo_queue_depth -2.5
                # HELP demo_latency_seconds Latency.
                # TYPE demo_latency_seconds histogram
                demo_latency_seconds_bucket{env="production",le="0.1"} 2
                demo_latency_seconds_bucket{env="production",le="1"} 3
                demo_latency_seconds_bucket{env="production",le="2.5"} 3
                demo_latency_seconds_bucket{env="production",le="+Inf"} 4
                demo_latency_seconds_sum{env="production"} 3.85
                demo_latency_seconds_count{env="production"} 4

                """)
    }

    @Test func escapesHelpAndLabelValues() throws {
        let registry = MetricsRegistry()
        let family = try registry.counter("demo_total", help: "a \\ b\nc", labelNames: ["reason"])
        family.labels("quote \" slash \\ newline \n end").increment()
        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(text.contains(#"# HELP demo_total a \\ b\nc"#))
        #expect(text.contains(#"demo_total{reason="quote \" slash \\ newline \n end"} 1"#))
    }

    @Test func labelledFamilyWithoutChildrenExposesOnlyItsMetadata() throws {
        let registry = MetricsRegistry()
        _ = try registry.gauge("demo_lag_records", help: "Lag.", labelNames: ["partition"])
        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(text == "# HELP demo_lag_records Lag.\n# TYPE demo_lag_records gauge\n")
    }

    @Test func formatsSpecialAndFractionalValuesAsPrometheusReadsThem() {
        #expect(PrometheusText.format(.infinity) == "+Inf")
        #expect(PrometheusText.format(-.infinity) == "-Inf")
        #expect(PrometheusText.format(.nan) == "NaN")
        #expect(PrometheusText.format(1_700_000_000) == "1700000000")
        #expect(PrometheusText.format(0.005) == "0.005")
        #expect(PrometheusText.format(1e-7) == "1e-07")
    }

    @Test(arguments: [
        ("demo_sent", "counter", "must end in '_total'"),
        ("demo_level_total", "gauge", "must not end in '_total'"),
        ("9lives_total", "counter", "is invalid"),
        ("demo-dash_total", "counter", "is invalid"),
    ])
    func rejectsNamesPrometheusWouldNot(name: String, kind: String, expected: String) {
        let registry = MetricsRegistry()
        #expect {
            if kind == "counter" {
                _ = try registry.counter(name, help: "h")
            } else {
                _ = try registry.gauge(name, help: "h")
            }
        } throws: { error in
            (error as? MetricsRegistryError)?.message.contains(expected) == true
        }
    }

    @Test func rejectsBadLabelNamesMissingHelpAndBadBuckets() {
        let registry = MetricsRegistry()
        #expect(throws: MetricsRegistryError.self) { try registry.counter("a_total", help: "h", labelNames: ["__x"]) }
        #expect(throws: MetricsRegistryError.self) { try registry.counter("b_total", help: "h", labelNames: ["a-b"]) }
        #expect(throws: MetricsRegistryError.self) {
            try registry.counter("c_total", help: "h", labelNames: ["x", "x"])
        }
        #expect(throws: MetricsRegistryError.self) { try registry.counter("d_total", help: "") }
        #expect(throws: MetricsRegistryError.self) { try registry.histogram("e", help: "h", buckets: [1, 1]) }
        #expect(throws: MetricsRegistryError.self) { try registry.histogram("f", help: "h", buckets: [2, 1]) }
        #expect(throws: MetricsRegistryError.self) { try registry.histogram("g", help: "h", buckets: [.infinity]) }
        #expect(throws: MetricsRegistryError.self) {
            try registry.histogram("h", help: "h", labelNames: ["le"], buckets: [1])
        }
    }

    @Test func rejectsANameThatClashesWithAHistogramSeries() throws {
        let registry = MetricsRegistry()
        _ = try registry.histogram("demo_seconds", help: "h", buckets: [1])
        #expect {
            _ = try registry.gauge("demo_seconds_count", help: "h")
        } throws: { error in
            (error as? MetricsRegistryError)?.message.contains("clashes") == true
        }
        #expect(throws: MetricsRegistryError.self) { try registry.gauge("demo_seconds", help: "h") }
    }

    @Test func foldsLabelSetsPastTheCapIntoOther() throws {
        let registry = MetricsRegistry()
        let family = try registry.counter("demo_total", help: "h", labelNames: ["rule_id"], maxLabelSets: 2)
        family.labels("r1").increment()
        family.labels("r2").increment()
        family.labels("r3").increment()
        family.labels("r4").increment(by: 2)
        family.labels("r1").increment()
        #expect(family.labelSetCount == 3)
        #expect(family.labels("r1").value == 2)
        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(text.contains(#"demo_total{rule_id="other"} 3"#))
        #expect(!text.contains("r3"))
    }

    @Test func removedChildIsNoLongerExposed() throws {
        let registry = MetricsRegistry()
        let lag = try registry.gauge("demo_lag", help: "h", labelNames: ["partition"])
        lag.labels("0").set(5)
        lag.labels("1").set(7)
        lag.remove("0")
        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(!text.contains(#"partition="0""#))
        #expect(text.contains(#"demo_lag{partition="1"} 7"#))
    }

    @Test func histogramPutsAValueOnABoundIntoThatBucketAndIgnoresNaN() throws {
        let histogram = try MetricsRegistry().histogram("demo", help: "h", buckets: [1, 2]).labels()
        histogram.observe(1)
        histogram.observe(2.0000001)
        histogram.observe(.nan)
        histogram.observe(.milliseconds(1500))
        let snapshot = histogram.snapshot
        #expect(snapshot.cumulativeCounts == [1, 2, 3])
        #expect(snapshot.count == 3)
        #expect(abs(snapshot.sum - 4.5000001) < 1e-9)
    }

    @Test func collectHooksRunBeforeEveryExposition() throws {
        let registry = MetricsRegistry()
        let scrapes = try registry.gauge("demo_scrapes", help: "h").labels()
        registry.onCollect { scrapes.increment() }
        _ = registry.exposition()
        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(text.contains("demo_scrapes 2\n"))
    }

    @Test func concurrentUpdatesAreNeitherLostNorTorn() async throws {
        let registry = MetricsRegistry()
        let counter = try registry.counter("demo_total", help: "h").labels()
        let gauge = try registry.gauge("demo_in_flight", help: "h").labels()
        let histogram = try registry.histogram("demo_seconds", help: "h", buckets: [0.5]).labels()
        let family = try registry.counter("demo_by_task_total", help: "h", labelNames: ["task"])
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    let mine = family.labels(String(task % 4))
                    for _ in 0..<10_000 {
                        counter.increment()
                        gauge.increment()
                        histogram.observe(0.25)
                        mine.increment()
                        gauge.decrement()
                    }
                }
            }
        }
        #expect(counter.value == 80_000)
        #expect(gauge.value == 0)
        #expect(histogram.snapshot.count == 80_000)
        #expect(histogram.snapshot.sum == 20_000)
        #expect((0..<4).map { family.labels(String($0)).value } == [20_000, 20_000, 20_000, 20_000])
    }

    @Test func seriesCacheCountsIntoTheFamilysChildForTheKeysLabels() throws {
        let registry = MetricsRegistry()
        let family = try registry.counter("demo_requests_total", help: "Requests.", labelNames: ["status"])
        let cache = SeriesCache<Int, Counter>(family, capacity: 2) { [$0 == 200 ? "ok" : "error"] }
        cache[200].increment()
        cache[200].increment()
        cache[503].increment()
        // Past the capacity the cache asks the family each time; the counts still land in the right series.
        cache[500].increment()
        cache[500].increment()
        #expect(cache[200] === family.labels("ok"))
        #expect(family.labels("ok").value == 2)
        #expect(family.labels("error").value == 3)
        #expect(family.labelSetCount == 2)
    }

    enum Light: String, CaseIterable, Sendable { case red, amber, green }

    @Test func caseSeriesMakesEachCasesChildOnFirstUseAndOnlyOnce() async throws {
        let registry = MetricsRegistry()
        let family = try registry.counter("demo_lights_total", help: "Lights.", labelNames: ["light"])
        let series = CaseSeries<Light, Counter>(family) { [$0.rawValue] }
        // No series before its case occurs: /metrics shows what `labels` would have shown.
        #expect(family.labelSetCount == 0)
        // Eight tasks race to the first use of each case; every count lands in one child per case.
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for round in 0..<5_000 {
                        series[round % 2 == 0 ? .red : (task % 2 == 0 ? .green : .red)].increment()
                    }
                }
            }
        }
        #expect(family.labelSetCount == 2)
        #expect(series[.red] === family.labels("red"))
        #expect(family.labels("red").value == 30_000)
        #expect(family.labels("green").value == 10_000)
        let text = String(decoding: registry.exposition(), as: UTF8.self)
        #expect(!text.contains("amber"))
    }
}
