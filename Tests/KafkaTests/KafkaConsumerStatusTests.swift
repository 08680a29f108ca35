// The consumer's status on the mock cluster: brokers reachable or not (with the cause) as they go down
// and come back, group membership; and the bounded close: by its deadline with the brokers gone or
// the group join still under way, and a revoke under way cut short by a shutdown's limit.

import Synchronization
import TestSupport
import Testing

@testable import Kafka

/// Settings for outage tests: statistics (the reachability check) and reconnects every 200-500 ms.
private func outageConfiguration(_ cluster: MockKafkaCluster, group: String) -> KafkaConsumerConfiguration {
    var configuration = testConsumerConfiguration(cluster, group: group)
    configuration.connectionCheckInterval = .milliseconds(200)
    configuration.client[property: "reconnect.backoff.ms"] = "100"
    configuration.client[property: "reconnect.backoff.max.ms"] = "500"
    return configuration
}

private func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

@Suite("KafkaConsumer status and bounded close")
struct KafkaConsumerStatusTests {
    @Test("brokers are unreachable with a cause while all are down, reachable again when they are back")
    func reachabilityFollowsTheBrokers() async throws {
        let cluster = try startCluster(brokers: 1, topic: "in", partitions: 2)
        let changes = Recorder<KafkaConsumerStatusChange>()
        let consumer = try KafkaConsumer(
            configuration: outageConfiguration(cluster, group: "g"), statusHandler: { changes.append($0) })
        #expect(!consumer.status.brokersReachable && !consumer.status.isGroupMember)
        try consumer.subscribe(topics: ["in"])
        #expect(
            await eventually(timeout: .seconds(10)) {
                consumer.status.brokersReachable && consumer.status.isGroupMember
                    && consumer.status.partitionsAssigned == 2
            })
        #expect(consumer.status.brokersUp >= 1)

        try cluster.setBrokerDown(1)
        #expect(await eventually(timeout: .seconds(10)) { !consumer.status.brokersReachable })
        let down = consumer.status
        #expect(down.brokersUp == 0)
        #expect(down.brokersCause?.isEmpty == false, "\(down)")

        try cluster.setBrokerUp(1)
        #expect(await eventually(timeout: .seconds(15)) { consumer.status.brokersReachable })
        #expect(consumer.status.brokersCause == nil)

        // One change each way, in order: joined reachable, lost, back.
        let flips = changes.all.filter(\.brokersReachabilityChanged).map(\.current.brokersReachable)
        #expect(flips == [true, false, true], "\(changes.all.map(\.current))")
        #expect(changes.all.filter(\.membershipChanged).first?.current.isGroupMember == true)
        try await consumer.close(deadline: .now + .seconds(10))
        #expect(!consumer.status.isGroupMember)
    }

    @Test("close with a deadline returns by it while the brokers are gone, and says where it was")
    func closeIsBoundedWithBrokersDown() async throws {
        let cluster = try startCluster(brokers: 1, topic: "in", partitions: 2)
        let consumer = try KafkaConsumer(configuration: outageConfiguration(cluster, group: "g"))
        try consumer.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { consumer.status.partitionsAssigned == 2 })
        try cluster.setBrokerDown(1)
        #expect(await eventually(timeout: .seconds(10)) { !consumer.status.brokersReachable })

        let started = ContinuousClock.now
        var problem: KafkaError?
        do {
            try await consumer.commit(deadline: .now + .milliseconds(500))
            try await consumer.close(deadline: .now + .seconds(1))
        } catch {
            problem = error
        }
        let took = seconds(ContinuousClock.now - started)
        // The contract is a deadline (1.5 s here); the slack is for a loaded CI machine, and still well below
        // the session timeout an unbounded close waits for.
        #expect(took < 5, "commit and close took \(took) s")
        // librdkafka may finish the close without the broker or not; a close it cannot finish is
        // reported as abandoned, naming what it was doing.
        if let problem, problem.code == .timeout, problem.message.contains("closing") {
            #expect(problem.message.contains("abandoned after"))
            #expect(problem.message.contains("while "))
        }
        print("close with the broker down: \(took) s, \(problem.map(\.description) ?? "closed")")
    }

    @Test("close during the group join returns by its deadline")
    func closeDuringJoinIsBounded() async throws {
        let cluster = try startCluster(brokers: 1, topic: "in", partitions: 2)
        try cluster.setBrokerDown(1)
        let consumer = try KafkaConsumer(configuration: outageConfiguration(cluster, group: "g"))
        try consumer.subscribe(topics: ["in"])
        try await Task.sleep(for: .milliseconds(300))
        let started = ContinuousClock.now
        try? await consumer.close(deadline: .now + .seconds(1))
        let took = seconds(ContinuousClock.now - started)
        // A deadline of 1 s, with slack for a loaded CI machine (a run under load took 1.9 s).
        #expect(took < 4, "close took \(took) s")
        #expect(!consumer.status.isGroupMember)
    }

    @Test("a revoke under way waits no longer than a limit set while it waits")
    func revocationLimitCutsARevokeShort() async throws {
        let cluster = try startCluster(topic: "in", partitions: 2)
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.rebalanceDeadline = .seconds(30)
        let revoking = Recorder<ContinuousClock.Instant>()
        let a = try KafkaConsumer(
            configuration: configuration,
            rebalanceHandler: { event in
                guard case .revoked(let revocation) = event else { return }
                revoking.append(revocation.deadline)
                // A handler that keeps to its deadline, like the pipeline's.
                try? await Task.sleep(until: revocation.deadline, clock: .continuous)
            })
        try a.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { a.assignment().count == 2 })
        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { !revoking.all.isEmpty })

        let limited = ContinuousClock.now
        a.limitRevocations(until: .now + .milliseconds(500))
        #expect(
            await eventually(timeout: .seconds(15)) {
                a.assignment().count == 1 && b.assignment().count == 1
            })
        let took = seconds(ContinuousClock.now - limited)
        // Without the limit the revoke would last until the handler's 30 s deadline: the split came first.
        let originalDeadline = try #require(revoking.all.first)
        #expect(ContinuousClock.now < originalDeadline, "the split took \(took) s after the limit")
        try await b.close(deadline: .now + .seconds(10))
        try await a.close(deadline: .now + .seconds(10))
    }

    @Test("broker states are counted from librdkafka's statistics, without internal and logical brokers")
    func brokerStatisticsAreCounted() throws {
        let json = """
            { "name": "rdkafka#consumer-1", "type": "consumer", "brokers":{ \
            "127.0.0.1:1/bootstrap": { "name":"127.0.0.1:1/bootstrap", "nodeid":-1, "source":"configured", \
            "state":"DOWN", "toppars":{ } }, \
            "127.0.0.1:2/2": { "name":"127.0.0.1:2/2", "nodeid":2, "source":"learned", "state":"UP", \
            "toppars":{ "in-0": { "topic":"in", "partition":0} } }, \
            "127.0.0.1:3/3": { "name":"127.0.0.1:3/3", "nodeid":3, "source":"learned", "state":"UPDATE" }, \
            "GroupCoordinator": { "name":"GroupCoordinator", "nodeid":-1, "source":"logical", "state":"UP" }, \
            ":0/internal": { "name":":0/internal", "nodeid":-1, "source":"internal", "state":"UP" } }, \
            "topics":{ "in": { "topic":"in", "partitions":{ "0": { "partition":0, "fetch_state":"active" } } } }, \
            "cgrp": { "state": "up", "join_state": "steady" } }
            """
        let counts = try #require(BrokerStatistics.counts(in: json))
        #expect(counts.up == 2)
        #expect(counts.known == 3)
        #expect(BrokerStatistics.counts(in: #"{"name":"x","type":"producer"}"#) == nil)
    }
}
