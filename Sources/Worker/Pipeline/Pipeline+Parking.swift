// Parking: pushes that APNs refused for their credential (a revoked key, a certificate for the other
// environment) are not the push's fault, and apps share partitions, so holding them in place would stop
// every app. The record goes to the retry topic with just its waiting devices and headers that say why
// and when to try again; its offset moves on. The worker consumes the retry topic too and tries the
// record again once its time has come; pushes already delivered are never sent again.

import APNs
import JSON
import Platform

/// The headers of a parked record (documented in README's "Parked records").
enum ParkHeader {
    static let prefix = "apns-worker.park."
    /// Apple's reason for refusing the credential, e.g. `InvalidProviderToken`.
    static let reason = "apns-worker.park.reason"
    /// The app (bundle id) whose credential was refused.
    static let app = "apns-worker.park.app"
    /// How many times the record has been parked, in decimal.
    static let count = "apns-worker.park.count"
    /// Unix milliseconds, in decimal, before which the record is not tried again.
    static let notBefore = "apns-worker.park.not-before"
    /// Where the event was first consumed from.
    static let sourceTopic = "apns-worker.park.source.topic"
    static let sourcePartition = "apns-worker.park.source.partition"
    static let sourceOffset = "apns-worker.park.source.offset"
}

extension Pipeline {
    /// The most records a partition may hold before it stops fetching: the in-flight cap, or a quarter of it
    /// for the retry topic, whose records wait out their park delay in flight and must leave room for new
    /// events.
    func heldLimit(_ partition: TopicPartition, _ flow: FlowControl) -> Int {
        partition.topic == configuration.retryTopic ? max(1, flow.capacity / 4) : flow.capacity
    }

    /// Held records at or below which a partition that stopped fetching fetches again: `resume_below`, or
    /// half the limit. Not the in-flight gate's default mark, an eighth below the cap: a partition that
    /// stopped fetching stopped librdkafka's fetch too, and fetching again costs a new fetch, so it waits
    /// for room worth one.
    func resumeHolding(_ partition: TopicPartition, _ flow: FlowControl) -> Int {
        if partition.topic == configuration.retryTopic { return heldLimit(partition, flow) / 2 }
        return configuration.resumeBelow ?? flow.capacity / 2
    }

    /// Waits until a parked record's time has come; false when `withdrawal` ended the wait (or found it
    /// withdrawn before a wait began).
    func waitUntilDue(_ record: SourceRecord, unless withdrawal: SendWithdrawal) async -> Bool {
        guard let text = Self.header(ParkHeader.notBefore, of: record), let notBefore = Double(text) else {
            return true
        }
        let wait = notBefore / 1000 - WallClockTime.seconds()
        // A clock far off, or a forged header, must not hold the record for longer than one park delay.
        guard wait > 0 else { return true }
        // Withdrawn (its partition revoked, or the worker stopping): the wait ends, and nothing is sent.
        let waited = try? await withdrawal.sleep(for: .milliseconds(Int64(min(wait, configuration.parkDelay) * 1000)))
        return waited ?? !withdrawal.isWithdrawn
    }

    /// The retry-topic record for an event's pushes that APNs refused for their credential, or nil when
    /// there are none: the event with only those devices, and headers saying why and when.
    func parkedRecord(_ prepared: PreparedEvent, sent: [DeliveryResult], source record: SourceRecord)
        -> OutboundRecord?
    {
        var waiting: [EventDevice] = []
        var reason = "credential"
        var app = prepared.event.app ?? ""
        prepared.plan.forEachDelivery { delivery, pushIndex in
            guard case .send(let device) = delivery, let pushIndex else { return }
            let result = sent[pushIndex]
            guard result.status == .credentialRefused else { return }
            waiting.append(device)
            reason = result.response?.reason?.rawValue ?? reason
            app = prepared.plan.pushes[pushIndex].app
        }
        guard !waiting.isEmpty else { return nil }
        // The first park names where the event came from; later ones keep that. Park headers on an input
        // record are a producer's, not ours: dropped, so that none can be forged.
        let reparking = record.topic == configuration.retryTopic
        let count = (reparking ? Self.header(ParkHeader.count, of: record).flatMap { Int($0) } ?? 0 : 0) + 1
        let notBefore = Int64((WallClockTime.seconds() + configuration.parkDelay) * 1000)
        var headers = record.headers.filter { !$0.name.hasPrefix(ParkHeader.prefix) || reparking }
        let renewed = [ParkHeader.reason, ParkHeader.app, ParkHeader.count, ParkHeader.notBefore]
        headers.removeAll { renewed.contains($0.name) }
        headers.append(RecordHeader(ParkHeader.reason, reason))
        headers.append(RecordHeader(ParkHeader.app, app))
        headers.append(RecordHeader(ParkHeader.count, String(count)))
        headers.append(RecordHeader(ParkHeader.notBefore, String(notBefore)))
        if !reparking {
            headers.append(RecordHeader(ParkHeader.sourceTopic, record.topic))
            headers.append(RecordHeader(ParkHeader.sourcePartition, String(record.partition)))
            headers.append(RecordHeader(ParkHeader.sourceOffset, String(record.offset)))
        }
        observer?.parked(record, devices: waiting.count, reason: reason)
        return OutboundRecord(
            topic: configuration.retryTopic, key: record.key,
            value: Self.event(record.value, keeping: waiting), headers: headers)
    }

    /// The event's JSON with only the devices given (those whose pushes are waiting), everything else as it
    /// was; the original bytes when they cannot be read back (they were decoded once, so they can).
    static func event(_ value: [UInt8]?, keeping devices: [EventDevice]) -> [UInt8]? {
        guard let value, case .object(var event)? = try? JSONValue(parsing: value) else { return value }
        let waiting = Set(devices.filter { $0.channelID == nil }.map(\.token))
        // None left is no `devices` at all: an empty list is not an event (the channels wait instead).
        if case .array(let all)? = event["devices"] {
            let kept = all.filter { device in
                guard let token = device["token"]?.stringValue else { return false }
                return waiting.contains(token)
            }
            event["devices"] = kept.isEmpty ? nil : .array(kept)
        }
        // Broadcast channels likewise; none left is no `channels` at all (an empty list is not an event).
        let waitingChannels = Set(devices.compactMap(\.channelID))
        if case .array(let all)? = event["channels"] {
            let kept = all.filter { channel in
                guard let id = channel["id"]?.stringValue else { return false }
                return waitingChannels.contains(id)
            }
            event["channels"] = kept.isEmpty ? nil : .array(kept)
        }
        return JSONValue.object(event).compactBytes
    }

    static func header(_ name: String, of record: SourceRecord) -> String? {
        record.headers.last { $0.name == name }?.value.map { String(decoding: $0, as: UTF8.self) }
    }
}
