// In-memory plug-ins: a source that plays records from a list on its own thread, a sink that
// acknowledges asynchronously (and can fail), and a transport answering from a closure.

import APNs
import Foundation
import JSON
import Synchronization

@testable import Worker

final class InMemoryEventSource: EventSource {
    struct Log {
        var stored: [TopicPartition: Int64] = [:]
        var storeCalls: [(TopicPartition, Int64)] = []
        var pauses = 0
        var resumes = 0
        var paused: Set<TopicPartition> = []
        var fetchStops = 0
        var fetchStopped: Set<TopicPartition> = []
        var closed = false
        /// Times the reader held its next record back because the pipeline paused or stopped its partition:
        /// proof that the reader saw the pause, after which it hands nothing more over until the resume.
        var recordsHeld = 0
    }
    let records: [SourceRecord]
    let log = Mutex(Log())
    let stopFlag = Atomic<Bool>(false)
    /// Runs inside the first `pause`, before it takes effect: a test widens the window in which a
    /// resume decided later could overtake it.
    let whileFirstPauseApplies: (@Sendable (InMemoryEventSource) -> Void)?
    private let firstPauseSeen = Atomic<Bool>(false)

    init(records: [SourceRecord], whileFirstPauseApplies: (@Sendable (InMemoryEventSource) -> Void)? = nil) {
        self.records = records
        self.whileFirstPauseApplies = whileFirstPauseApplies
    }

    func start(handler: any SourceHandler) throws {
        let records = self.records
        let partitions = Array(Set(records.map(\.topicPartition)))
        let thread = Thread { [self] in
            handler.assigned(partitions)
            var index = 0
            // Records of partitions that stopped fetching, in order, delivered once they fetch again.
            var deferred: [TopicPartition: [SourceRecord]] = [:]
            while (index < records.count || !deferred.isEmpty) && !stopFlag.load(ordering: .relaxed) {
                let (paused, stopped) = log.withLock { ($0.paused, $0.fetchStopped) }
                // Like the pipeline's gate: a paused partition's next record waits, and so does the reader.
                if let partition = deferred.keys.first(where: { !stopped.contains($0) }) {
                    let record = deferred[partition]!.removeFirst()
                    if deferred[partition]!.isEmpty { deferred[partition] = nil }
                    while log.withLock({ $0.paused.contains(partition) }) && !stopFlag.load(ordering: .relaxed) {
                        log.withLock { $0.recordsHeld += 1 }
                        usleep(200)
                    }
                    handler.received(record)
                    continue
                }
                guard index < records.count else {
                    usleep(200)
                    continue
                }
                let record = records[index]
                if paused.contains(record.topicPartition) {
                    log.withLock { $0.recordsHeld += 1 }
                    usleep(200)
                    continue
                }
                // Like librdkafka's pause: a partition that stopped fetching delivers nothing more for now,
                // the others go on.
                if stopped.contains(record.topicPartition) || deferred[record.topicPartition] != nil {
                    log.withLock { $0.recordsHeld += 1 }
                    deferred[record.topicPartition, default: []].append(record)
                    index += 1
                    continue
                }
                handler.received(record)
                index += 1
            }
        }
        thread.start()
    }

    func store(_ partition: TopicPartition, nextOffset: Int64) {
        log.withLock {
            if let previous = $0.stored[partition] { precondition(nextOffset > previous, "stored offset went back") }
            $0.stored[partition] = nextOffset
            $0.storeCalls.append((partition, nextOffset))
        }
    }
    func pause(_ partitions: [TopicPartition]) {
        if let whileFirstPauseApplies, !firstPauseSeen.exchange(true, ordering: .relaxed) {
            whileFirstPauseApplies(self)
        }
        log.withLock {
            $0.pauses += 1
            $0.paused.formUnion(partitions)
        }
    }
    func resume(_ partitions: [TopicPartition]) {
        log.withLock {
            $0.resumes += 1
            $0.paused.subtract(partitions)
        }
    }
    func stopFetching(_ partitions: [TopicPartition]) {
        log.withLock {
            $0.fetchStops += 1
            $0.fetchStopped.formUnion(partitions)
        }
    }
    func resumeFetching(_ partitions: [TopicPartition]) {
        log.withLock { $0.fetchStopped.subtract(partitions) }
    }
    func stopReceiving() { stopFlag.store(true, ordering: .relaxed) }
    func close() async throws { log.withLock { $0.closed = true } }
}

final class InMemoryResultSink: ResultSink {
    let published = Mutex<[OutboundRecord]>([])
    /// Every record in the order `publish` was called (acknowledgements come back in any order).
    let submitted = Mutex<[OutboundRecord]>([])
    let pending = Atomic<Int>(0)
    let failTopic: String?
    let delay: Double
    /// Like Kafka's message.max.bytes: larger records fail with `RecordTooLargeError`.
    let maximumBytes: Int?
    /// Whether a record too large is refused inside `publish` (like librdkafka at enqueue) rather than
    /// later (like a delivery report).
    let refusesAtOnce: Bool
    /// Records refused as too large, in order.
    let refused = Mutex<[OutboundRecord]>([])

    init(failTopic: String? = nil, delay: Double = 0, maximumBytes: Int? = nil, refusesAtOnce: Bool = false) {
        self.failTopic = failTopic
        self.delay = delay
        self.maximumBytes = maximumBytes
        self.refusesAtOnce = refusesAtOnce
    }

    func publish(_ record: OutboundRecord, acknowledged: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        submitted.withLock { $0.append(record) }
        let tooLarge = maximumBytes.flatMap { limit in
            record.byteCount > limit
                ? RecordTooLargeError(
                    record: record, limitBytes: limit,
                    detail: "a record of \(record.byteCount) bytes for \(record.topic) is over \(limit) bytes")
                : nil
        }
        if tooLarge != nil { refused.withLock { $0.append(record) } }
        if let tooLarge, refusesAtOnce {
            acknowledged(.failure(tooLarge))
            return
        }
        pending.add(1, ordering: .relaxed)
        let fail = record.topic == failTopic
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            if let tooLarge {
                acknowledged(.failure(tooLarge))
            } else if fail {
                acknowledged(.failure(CocoaError(.fileWriteUnknown)))
            } else {
                published.withLock { $0.append(record) }
                acknowledged(.success(()))
            }
            pending.subtract(1, ordering: .relaxed)
        }
    }

    func flush(timeout: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        // Sleeps as a task, not with usleep: blocking one of the cooperative pool's two threads here
        // stalled every other test's tasks in the parallel suite for as long as the flush waited.
        while pending.load(ordering: .relaxed) > 0 && Date() < deadline { try? await Task.sleep(for: .milliseconds(1)) }
        return pending.load(ordering: .relaxed) == 0
    }

    func records(on topic: String) -> [OutboundRecord] { published.withLock { $0.filter { $0.topic == topic } } }
    func json(on topic: String) -> [JSONValue] {
        records(on: topic).compactMap { $0.value.flatMap { try? JSONValue(parsing: $0) } }
    }
}

struct ClosureTransport: PushTransport {
    let answer: @Sendable (PlannedPush) async -> DeliveryResult
    func deliver(_ push: PlannedPush) async -> DeliveryResult { await answer(push) }
}

/// APNs' answer as a one-attempt delivery result: 200, or an error status with its reason.
func apnsAnswer(_ push: PlannedPush, status: Int, reason: String? = nil, timestampMilliseconds: Int64? = nil)
    -> DeliveryResult
{
    var body: [UInt8] = []
    if let reason {
        var object: JSONObject = ["reason": .string(reason)]
        if let timestampMilliseconds { object["timestamp"] = .int(timestampMilliseconds) }
        body = JSONValue.object(object).compactBytes
    }
    let response = APNsResponse(
        status: status, headers: [APNsHeaderField("apns-id", push.request.apnsID.string)], body: body)
    let attempt = DeliveryAttempt(
        apnsID: push.request.apnsID, httpStatus: status, reason: reason, errorMessage: nil, startedAt: Date(),
        latency: .milliseconds(1))
    let final: DeliveryStatus = status == 200 ? .delivered : (status >= 500 || status == 429 ? .failed : .rejected)
    return DeliveryResult(status: final, response: response, attempts: [attempt], summary: "test")
}

/// Sends an alert for every device, with the event's type as the alert text.
struct OnePushPerDevicePlanner: NotificationPlanner {
    func plan(_ event: PushEvent, now: Double) -> EventPlan {
        var plan = EventPlan()
        for device in event.devices {
            do {
                let token = try DeviceToken(device.token)
                let request = APNsRequest(
                    deviceToken: token, environment: device.environment == "sandbox" ? .sandbox : .production,
                    topic: "com.example.app", pushType: .alert, payload: ["aps": ["alert": .string(event.type)]])
                plan.send(PlannedPush(request: request, app: "com.example.app", ruleID: "all"), to: device)
            } catch {
                plan.add(
                    .reject(
                        device: device, reason: "BadDeviceToken", detail: "\(error)", ruleID: "all", topic: nil,
                        pushType: nil))
            }
        }
        return plan
    }
}

func makeRecord(partition: Int32, offset: Int64, devices: [String], id: String? = nil) -> SourceRecord {
    let deviceList = devices.map { #"{"token":"\#($0)","environment":"production"}"# }.joined(separator: ",")
    let eventID = id ?? "e\(partition)-\(offset)"
    let value = #"{"id":"\#(eventID)","type":"test","app":"com.example.app","devices":[\#(deviceList)]}"#
    return SourceRecord(
        topic: "push.requests", partition: partition, offset: offset, key: Array("k".utf8), value: Array(value.utf8))
}
