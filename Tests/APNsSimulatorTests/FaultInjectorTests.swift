// Fault decisions: scripts for the Nth request or stream, rates, GOAWAY after N streams, latency.

import Platform
import Testing

@testable import APNsSimulator

@Suite struct FaultInjectorTests {
    func decisions(_ faults: SimulatorFaults, streams: ClosedRange<Int>, seed: UInt64 = 7) -> [FaultDecision] {
        let injector = FaultInjector(faults)
        var cache = FaultSnapshot()
        var random = SimulatorRandom(seed: seed)
        return streams.map { injector.decide(streamOrdinal: $0, cache: &cache, random: &random) }
    }

    @Test func noFaultsProcessEveryRequestAtOnce() {
        for decision in decisions(.none, streams: 1...100) {
            #expect(decision == FaultDecision())
        }
    }

    @Test func aScriptActsOnTheNthRequestOnly() {
        var faults = SimulatorFaults()
        faults.script = [
            ScriptedFault(.request(2), .fail(.serviceUnavailable(retryAfterSeconds: 3))),
            ScriptedFault(.request(3), .stall),
            ScriptedFault(.request(4), .dropConnection),
            ScriptedFault(.request(5), .goAway(processThisStream: false)),
            ScriptedFault(.request(6), .goAway(processThisStream: true)),
            ScriptedFault(.request(7), .delay(milliseconds: 250)),
            ScriptedFault(.request(8), .setMaxConcurrentStreams(1)),
        ]
        let result = decisions(faults, streams: 1...9)
        #expect(result[0] == FaultDecision())
        #expect(
            result[1].outcome
                == .fail(InjectedFailure(status: 503, reason: "ServiceUnavailable", retryAfterSeconds: 3)))
        #expect(result[2].outcome == .stall)
        #expect(result[3].outcome == .dropConnection)
        #expect(result[4].outcome == .goAwayBeforeThisStream)
        #expect(result[5].outcome == .process && result[5].goAwayAfterThisStream)
        #expect(result[6].outcome == .process && result[6].delayNanoseconds == 250_000_000)
        #expect(result[7].outcome == .process && result[7].newMaxConcurrentStreams == 1)
        #expect(result[8] == FaultDecision())
    }

    @Test func streamTriggersApplyToEveryConnection() {
        var faults = SimulatorFaults()
        faults.script = [ScriptedFault(.stream(2), .stall)]
        let injector = FaultInjector(faults)
        var random = SimulatorRandom(seed: 1)
        for _ in 0..<3 {  // three connections, each with its own stream numbers
            var cache = FaultSnapshot()
            #expect(injector.decide(streamOrdinal: 1, cache: &cache, random: &random).outcome == .process)
            #expect(injector.decide(streamOrdinal: 2, cache: &cache, random: &random).outcome == .stall)
            #expect(injector.decide(streamOrdinal: 3, cache: &cache, random: &random).outcome == .process)
        }
    }

    @Test func setFaultsRestartsTheRequestCountAndReachesCachedConnections() {
        var faults = SimulatorFaults()
        faults.script = [ScriptedFault(.request(1), .stall)]
        let injector = FaultInjector(.none)
        var cache = FaultSnapshot()
        var random = SimulatorRandom(seed: 1)
        #expect(injector.decide(streamOrdinal: 1, cache: &cache, random: &random).outcome == .process)
        injector.setFaults(faults)
        #expect(injector.decide(streamOrdinal: 2, cache: &cache, random: &random).outcome == .stall)
        #expect(injector.decide(streamOrdinal: 3, cache: &cache, random: &random).outcome == .process)
        #expect(injector.current(ifNewerThan: cache.generation) == nil)
    }

    @Test func ratesHitTheirShareAndRepeatWithTheSameSeed() {
        var faults = SimulatorFaults()
        faults.failureRate = 0.2
        faults.failure = .tooManyRequests(retryAfterSeconds: 1)
        faults.stallRate = 0.1
        faults.dropConnectionRate = 0.05
        let first = decisions(faults, streams: 1...10_000, seed: 42)
        let failures = first.filter { $0.outcome == .fail(.tooManyRequests(retryAfterSeconds: 1)) }.count
        let stalls = first.filter { $0.outcome == .stall }.count
        let drops = first.filter { $0.outcome == .dropConnection }.count
        #expect((1800...2200).contains(failures), "failures: \(failures)")
        #expect((850...1150).contains(stalls), "stalls: \(stalls)")
        #expect((400...600).contains(drops), "drops: \(drops)")
        #expect(decisions(faults, streams: 1...10_000, seed: 42) == first)
        #expect(decisions(faults, streams: 1...10_000, seed: 43) != first)
    }

    @Test func goAwayAfterNStreamsMarksTheNthStreamOfEachConnection() {
        var faults = SimulatorFaults()
        faults.goAwayAfterStreams = 3
        let result = decisions(faults, streams: 1...5)
        #expect(result.map(\.goAwayAfterThisStream) == [false, false, true, false, false])
    }

    @Test func latencySamplesStayInTheirDistribution() {
        var random = SimulatorRandom(seed: 9)
        let uniform = LatencyDistribution(fixedMilliseconds: 5, jitter: .uniform(maximumMilliseconds: 10))
        let samples = (0..<5000).map { _ in uniform.sampleMilliseconds { random.unit() } }
        #expect(samples.allSatisfy { $0 >= 5 && $0 < 15 })
        let mean = samples.reduce(0, +) / Double(samples.count)
        #expect(abs(mean - 10) < 0.5, "uniform mean \(mean)")

        let exponential = LatencyDistribution(fixedMilliseconds: 1, jitter: .exponential(meanMilliseconds: 4))
        let exponentialSamples = (0..<20_000).map { _ in exponential.sampleMilliseconds { random.unit() } }
        let exponentialMean = exponentialSamples.reduce(0, +) / Double(exponentialSamples.count)
        #expect(abs(exponentialMean - 5) < 0.3, "exponential mean \(exponentialMean)")
        #expect(exponentialSamples.allSatisfy { $0 >= 1 && $0 <= 81 })
    }

    @Test func validationNamesTheWrongValue() {
        var faults = SimulatorFaults()
        faults.failureRate = 1.5
        #expect(throws: SimulatorError.self) { try faults.validate() }
        do {
            try faults.validate()
        } catch {
            #expect(error.message.contains("failureRate"))
        }
        faults.failureRate = 0.6
        faults.stallRate = 0.6
        #expect(throws: SimulatorError.self) { try faults.validate() }
        faults = SimulatorFaults()
        faults.script = [ScriptedFault(.request(0), .stall)]
        #expect(throws: SimulatorError.self) { try faults.validate() }
        faults.script = [ScriptedFault(.request(1), .setMaxConcurrentStreams(0))]
        #expect(throws: SimulatorError.self) { try faults.validate() }
    }
}

@Suite struct SimulatorResponseTests {
    @Test func errorBodiesAreApplesJSON() {
        let plain = SimulatorResponse(status: 400, apnsID: "x", reason: "BadDeviceToken")
        #expect(String(decoding: plain.body, as: UTF8.self) == #"{"reason":"BadDeviceToken"}"#)
        let gone = SimulatorResponse(
            status: 410, apnsID: "x", reason: "Unregistered", timestampMilliseconds: 1_650_000_000_123)
        #expect(String(decoding: gone.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1650000000123}"#)
        #expect(SimulatorResponse(status: 200, apnsID: "x").body.isEmpty)
    }

    @Test func generatedIdsAreCanonicalVersion4UUIDs() {
        var random = SimulatorRandom(seed: 3)
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = random.uuidString()
            #expect(id.count == 36)
            let characters = Array(id)
            #expect(characters[8] == "-" && characters[13] == "-" && characters[18] == "-" && characters[23] == "-")
            #expect(characters[14] == "4")
            #expect("89ab".contains(characters[19]))
            #expect(id.allSatisfy { "0123456789abcdef-".contains($0) })
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }
}
