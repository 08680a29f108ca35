// Two consumers in one group on the mock cluster: partitions split, revoke/assign sequences for
// EAGER and COOPERATIVE protocols, store-and-commit on revoke, the revoke deadline, stalled readers,
// and a clean leave on close.

import Kafka
import Synchronization
import TestSupport
import Testing

/// A rebalance event reduced to text, e.g. "assigned 0,1" or "revoked 2,3".
private func describe(_ event: KafkaRebalanceEvent) -> String {
    switch event {
    case .assigned(let partitions):
        return "assigned " + partitions.map { String($0.partition) }.joined(separator: ",")
    case .revoked(let revocation):
        return (revocation.isLost ? "lost " : "revoked ")
            + revocation.partitions.map { String($0.partition) }
            .joined(separator: ",")
    }
}

private func numbers(_ partitions: [KafkaTopicPartition]) -> String {
    partitions.map { String($0.partition) }.joined(separator: ",")
}

/// Whether `events` alternate "assigned X" / "revoked X" (each revoke giving up all that was held)
/// and end with "assigned `final`".
private func isEagerSequence(_ events: [String], endingWith final: String) -> Bool {
    guard events.count % 2 == 1, events.last == "assigned \(final)" else { return false }
    var held = ""
    for (index, event) in events.enumerated() {
        if index % 2 == 0 {
            guard event.hasPrefix("assigned ") else { return false }
            held = String(event.dropFirst("assigned ".count))
        } else if event != "revoked \(held)" {
            return false
        }
    }
    return true
}

/// Waits until two consumers hold disjoint, non-empty shares of all `count` partitions.
private func waitForSplit(_ a: KafkaConsumer, _ b: KafkaConsumer, count: Int) async -> Bool {
    await eventually(timeout: .seconds(15)) {
        let first = a.assignment()
        let second = b.assignment()
        return !first.isEmpty && !second.isEmpty && first.count + second.count == count
            && Set(first).isDisjoint(with: second)
    }
}

@Suite("KafkaConsumer rebalancing")
struct KafkaRebalanceTests {
    @Test(
        "two consumers split the partitions; the first sees the protocol's revoke/assign sequence",
        arguments: [KafkaConsumerConfiguration.AssignmentStrategy.range, .cooperativeSticky]
    )
    func twoConsumersSplitPartitions(strategy: KafkaConsumerConfiguration.AssignmentStrategy) async throws {
        let cluster = try startCluster(topic: "in", partitions: 4)
        let configuration = testConsumerConfiguration(cluster, group: "g", strategy: strategy)
        let eventsA = Recorder<String>()
        let eventsB = Recorder<String>()
        let a = try KafkaConsumer(configuration: configuration) { eventsA.append(describe($0)) }
        try a.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { a.assignment().count == 4 })

        let b = try KafkaConsumer(configuration: configuration) { eventsB.append(describe($0)) }
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 4))
        let finalA = numbers(a.assignment())
        let finalB = numbers(b.assignment())
        // The handlers run just after librdkafka applied the assignment; wait until both reported it.
        let settled = await eventually {
            eventsB.all.last == "assigned \(finalB)"
                && eventsA.all.last == (strategy == .cooperativeSticky ? "revoked \(finalB)" : "assigned \(finalA)")
        }
        #expect(settled, "A: \(eventsA.all), B: \(eventsB.all)")

        if strategy == .cooperativeSticky {
            // Incremental: A gives up only what moves to B and keeps the rest throughout.
            #expect(eventsA.all == ["assigned 0,1,2,3", "revoked \(finalB)"])
            #expect(eventsB.all == ["assigned \(finalB)"])
        } else {
            // Eager: A gives up everything, then gets its new share (the group may take more than one
            // round to settle, each round again revoking everything).
            #expect(Array(eventsA.all.prefix(3)) == ["assigned 0,1,2,3", "revoked 0,1,2,3", "assigned \(finalA)"])
            #expect(isEagerSequence(eventsA.all, endingWith: finalA))
            #expect(isEagerSequence(eventsB.all, endingWith: finalB))
        }
        try await a.close()
        try await b.close()
    }

    @Test("offsets stored in the revoke handler are committed before the partitions move")
    func revokeHandlerStoresAndCommitsBeforeRelease() async throws {
        let cluster = try startCluster(topic: "in", partitions: 4)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 40, partitions: 4)  // offsets 0...9 in each
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.enableAutoCommit = false  // so only the revoke path commits

        let nextOffsets = Mutex<[KafkaTopicPartition: Int64]>([:])
        let revokedByA = Recorder<KafkaTopicPartition>()
        let errorsAtA = Recorder<KafkaError>()
        let holder = Mutex<KafkaConsumer?>(nil)
        let a = try KafkaConsumer(
            configuration: configuration,
            rebalanceHandler: { event in
                guard case .revoked(let revocation) = event, let consumer = holder.withLock({ $0 }) else { return }
                let finished = nextOffsets.withLock { $0 }
                for partition in revocation.partitions {
                    revokedByA.append(partition)
                    if let next = finished[partition] {
                        try? consumer.storeOffset(
                            topic: partition.topic, partition: partition.partition, nextOffset: next)
                    }
                }
            },
            eventHandler: { event in
                if case .error(let error) = event { errorsAtA.append(error) }
            })
        holder.withLock { $0 = a }
        try a.subscribe(topics: ["in"])
        for message in try await receive(40, from: a, within: .seconds(15)) {
            nextOffsets.withLock { $0[message.topicPartition] = message.offset + 1 }
        }
        #expect(nextOffsets.withLock { $0.count } == 4)

        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 4))
        let moved = revokedByA.all
        #expect(Set(moved) == Set(b.assignment()))

        let committed = try await KafkaCommittedOffsets.read(
            groupID: "g", partitions: (0..<4).map { KafkaTopicPartition(topic: "in", partition: $0) },
            configuration: configuration.client
        )
        try await produce(producer, topic: "in", count: 8, partitions: 4, prefix: "late")
        let atB = try await receive(4, from: b, within: .seconds(10))

        // librdkafka 2.0.2's mock coordinator refuses commits while a rebalance round is open (a real
        // broker accepts them then). Rarely, under heavy load, another round opens just before the
        // revoke commit; the consumer then reports that it gave up, and the partitions fall back to
        // redelivery from the last commit. Only that exact, reported case is tolerated.
        let gaveUp = errorsAtA.all.contains { error in
            error.code == .commit && error.message.contains("gave up committing before releasing")
                && ["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"].contains(error.librdkafkaName ?? "")
        }
        withKnownIssue(
            "mock coordinator refused the revoke commit during a new rebalance round",
            isIntermittent: true
        ) {
            #expect(committed == Dictionary(uniqueKeysWithValues: moved.map { ($0, 10) }))
            // B starts where A left off: it sees only the records written after the handover.
            #expect(atB.count == 4)
            #expect(atB.allSatisfy { $0.valueString.hasPrefix("late") && $0.offset >= 10 })
        } when: {
            gaveUp
        }
        if gaveUp {
            // The fallback: B starts again from the beginning of the moved partitions.
            #expect(atB.first?.offset == 0)
        }
        try await producer.close(timeout: .seconds(5))
        try await a.close()
        try await b.close()
    }

    @Test("a revoke handler that overruns the deadline does not hold the partitions")
    func revokeDeadlineIsEnforced() async throws {
        let cluster = try startCluster(topic: "in", partitions: 2)
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.rebalanceDeadline = .milliseconds(500)
        let errors = Recorder<KafkaError>()
        let a = try KafkaConsumer(
            configuration: configuration,
            rebalanceHandler: { event in
                if case .revoked = event { try? await Task.sleep(for: .seconds(30)) }
            },
            eventHandler: { event in if case .error(let error) = event { errors.append(error) } }
        )
        try a.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { a.assignment().count == 2 })
        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 2))
        #expect(errors.all.contains { $0.code == .timeout })
        try await b.close()
    }

    @Test(
        "a record is current while its partition stays assigned, and not once it moved, was reassigned or closed",
        arguments: [KafkaConsumerConfiguration.AssignmentStrategy.range, .cooperativeSticky]
    )
    func recordsAreCurrentOnlyWhileTheirAssignmentLasts(
        strategy: KafkaConsumerConfiguration.AssignmentStrategy
    ) async throws {
        let cluster = try startCluster(topic: "in", partitions: 4)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 400, partitions: 4)
        try await producer.close(timeout: .seconds(5))
        let configuration = testConsumerConfiguration(cluster, group: "g", strategy: strategy)
        let a = try KafkaConsumer(configuration: configuration)
        try a.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { a.assignment().count == 4 })
        // A record of each partition, taken while this member holds all four.
        var firstOfEach: [Int32: KafkaConsumerMessage] = [:]
        for try await message in a.messages {
            if firstOfEach[message.partition] == nil { firstOfEach[message.partition] = message }
            if firstOfEach.count == 4 { break }
        }
        let records = firstOfEach.values.sorted { $0.partition < $1.partition }
        @Sendable func current(_ record: KafkaConsumerMessage) -> Bool {
            a.isCurrent(record.topicPartition, assignment: record.assignment)
        }
        #expect(records.count == 4 && records.allSatisfy(current))

        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 4))
        let kept = Set(a.assignment())
        let moved = records.filter { !kept.contains($0.topicPartition) }
        #expect(!moved.isEmpty)
        // What moved is no longer this member's. What it kept is still current under the cooperative
        // protocol, and assigned anew (a record taken before is stale) under the eager one.
        #expect(await eventually { moved.allSatisfy { !current($0) } })
        let stillHeld = records.filter { kept.contains($0.topicPartition) }
        if strategy == .cooperativeSticky {
            #expect(stillHeld.allSatisfy(current))
        } else {
            #expect(await eventually { stillHeld.allSatisfy { !current($0) } })
        }
        try await a.close()
        #expect(records.allSatisfy { !current($0) })
        try await b.close()
    }

    @Test("a consumer whose reader stalls still gives up partitions in a rebalance")
    func stalledReaderDoesNotBlockRebalance() async throws {
        let cluster = try startCluster(topic: "in", partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 100, partitions: 2)
        try await producer.close(timeout: .seconds(5))
        var configuration = testConsumerConfiguration(cluster, group: "g")
        configuration.bufferCapacity = 4
        configuration.stallTimeout = .milliseconds(200)
        let stalled = try KafkaConsumer(configuration: configuration)
        try stalled.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { stalled.bufferedMessageCount == 4 })

        let reader = try KafkaConsumer(configuration: configuration)
        try reader.subscribe(topics: ["in"])
        #expect(await waitForSplit(stalled, reader, count: 2))
        // The partition that moved arrives complete at the new owner, since nothing was stored for it.
        let moved = try #require(reader.assignment().first)
        let received = try await receive(50, from: reader, within: .seconds(10))
        #expect(received.map(\.offset) == Array(0..<50))
        #expect(received.allSatisfy { $0.topicPartition == moved })
        #expect(stalled.bufferedMessageCount <= 4)
        try await stalled.close()
        try await reader.close()
    }

    @Test("a partition paused before a rebalance fetches again when its owner resumes it after getting it back")
    func pausedPartitionResumesAfterRebalance() async throws {
        // librdkafka keeps a partition's pause flag across a revoke and a new assignment, while the
        // consumer forgets the owner's pause at the revoke: the revoke must clear the flag. (Both
        // partitions fetch first, so that librdkafka itself holds the pause.)
        let cluster = try startCluster(topic: "in", partitions: 2)
        let producer = try KafkaProducer(configuration: testProducerConfiguration(cluster))
        try await produce(producer, topic: "in", count: 10, partitions: 2, prefix: "a")
        let configuration = testConsumerConfiguration(cluster, group: "g", strategy: .range)
        let a = try KafkaConsumer(configuration: configuration)
        try a.subscribe(topics: ["in"])
        let first = try await receive(10, from: a, within: .seconds(15))
        #expect(first.count == 10)
        // Committed, so that the partitions come back after these records.
        try a.storeOffsets(Dictionary(first.map { ($0.topicPartition, $0.offset + 1) }, uniquingKeysWith: max))
        try await a.commit()
        try a.pause(a.assignment())

        // A second member takes one partition, then leaves: `a` is assigned both again.
        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 2))
        try await b.close()
        // What `assignment()` lists, `resume` accepts.
        #expect(await eventually(timeout: .seconds(15)) { a.assignment().count == 2 })
        try a.resume(a.assignment())

        try await produce(producer, topic: "in", count: 20, partitions: 2, prefix: "b")
        let received = try await receive(20, from: a, within: .seconds(15))
        #expect(Set(received.map(\.partition)) == [0, 1], "both partitions fetch again")
        #expect(received.count == 20)
        #expect(received.allSatisfy { $0.valueString.hasPrefix("b") })
        try await producer.close(timeout: .seconds(5))
        try await a.close()
    }

    @Test("in a revoke handler the assignment leaves out the revoked partitions, and pausing what it lists succeeds")
    func theAssignmentDuringARevokeIsWhatPauseAccepts() async throws {
        // A worker told to stop while a revoke runs pauses what it holds: librdkafka still lists the revoked
        // partitions until the handler has handed them over, and a pause naming them was refused whole.
        let cluster = try startCluster(topic: "in", partitions: 4)
        let configuration = testConsumerConfiguration(cluster, group: "g", strategy: .cooperativeSticky)
        let seen = Recorder<String>()
        let holder = Mutex<KafkaConsumer?>(nil)
        let a = try KafkaConsumer(configuration: configuration) { event in
            guard case .revoked(let revocation) = event, let consumer = holder.withLock({ $0 }) else { return }
            let held = consumer.assignment()
            let listsRevoked = !Set(held).isDisjoint(with: revocation.partitions)
            let paused = (try? consumer.pause(held)) != nil
            let pausedAll = (try? consumer.pauseAll()).map(numbers) ?? "refused"
            seen.append("held \(numbers(held)), lists revoked \(listsRevoked), paused \(paused), all \(pausedAll)")
        }
        holder.withLock { $0 = a }
        try a.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { a.assignment().count == 4 })
        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 4))
        #expect(await eventually { !seen.all.isEmpty })
        let kept = numbers(a.assignment())
        #expect(seen.all.first == "held \(kept), lists revoked false, paused true, all \(kept)")
        try await b.close()
        try await a.close()
    }

    @Test("close leaves the group: the final revoke is surfaced, the stream ends, the other member takes over")
    func closeLeavesGroupCleanly() async throws {
        let cluster = try startCluster(topic: "in", partitions: 4)
        let configuration = testConsumerConfiguration(cluster, group: "g")
        let eventsA = Recorder<String>()
        let a = try KafkaConsumer(configuration: configuration) { eventsA.append(describe($0)) }
        try a.subscribe(topics: ["in"])
        #expect(await eventually(timeout: .seconds(10)) { a.assignment().count == 4 })
        let b = try KafkaConsumer(configuration: configuration)
        try b.subscribe(topics: ["in"])
        #expect(await waitForSplit(a, b, count: 4))
        let keptByA = numbers(a.assignment())

        let reader = Task { () -> Int in
            var count = 0
            for try await _ in a.messages { count += 1 }
            return count
        }
        try await a.close()
        #expect(eventsA.all.last == "revoked \(keptByA)")
        #expect(try await reader.value == 0)  // the stream ended
        #expect(await eventually(timeout: .seconds(10)) { b.assignment().count == 4 })
        try await b.close()
    }
}
