// A record's way from bytes to results: decode and plan it (or make it a dead letter), send its pushes,
// and build its outcomes and invalid-token events.

import APNs
import Platform

extension Pipeline {
    func process(_ record: SourceRecord, generation: UInt64) async {
        // Decoding, planning and building the results are synchronous helpers, never inlined here: only
        // what lives across the one await is in this async frame, which then fits the lane task's first
        // allocator slab (frames beyond it cost a malloc and a free per record). An async frame holds
        // the locals of everything inlined into it for the whole round trip to APNs: `results` inlined
        // took it from 480 to 816 bytes.
        if record.topic == configuration.retryTopic { await waitUntilDue(record) }
        switch prepare(record) {
        case .deadLetter(let output):
            publishDeadLetter(output, of: record, generation: generation)
        case .ready(let prepared):
            let sent = await transport.deliverAll(prepared.plan.pushes[...])
            publishResults(of: prepared, sent: sent, source: record, generation: generation)
        }
    }

    /// Never inlined into `process` (see there).
    @inline(never)
    func publishDeadLetter(_ output: OutboundRecord, of record: SourceRecord, generation: UInt64) {
        publish([output], of: record, generation: generation, outcomes: PublishedOutcomes(), eventTime: nil)
    }

    /// Builds the sent event's results and hands them to the sink; never inlined into `process` (see there).
    @inline(never)
    func publishResults(
        of prepared: PreparedEvent, sent: [DeliveryResult], source record: SourceRecord, generation: UInt64
    ) {
        let (outputs, outcomes) = results(of: prepared, sent: sent, source: record)
        publish(outputs, of: record, generation: generation, outcomes: outcomes, eventTime: prepared.eventTime)
    }

    /// A decoded and planned event, before its pushes are sent.
    struct PreparedEvent {
        var event: PushEvent
        var plan: EventPlan
        var eventTime: Double?
    }

    enum Preparation {
        case ready(PreparedEvent)
        /// The record as a dead letter: undecodable, invalid, or its event cannot be planned.
        case deadLetter(OutboundRecord)
    }

    @inline(never)
    func prepare(_ record: SourceRecord) -> Preparation {
        do throws(PipelineInputError) {
            var event = try PipelineInputError.decode(record.value)
            let plan = try PipelineInputError.plan(event, with: planner)
            // The parsed document is for the rules and templates, which are done with it now; the record
            // waits a round trip to APNs holding only what its results need (the event's id).
            event.document = .null
            return .ready(PreparedEvent(event: event, plan: plan, eventTime: event.occurredAt ?? record.timestamp))
        } catch {
            observer?.deadLettered(record, errorClass: error.errorClass, message: error.message)
            return .deadLetter(
                DeadLetterHeader.record(
                    for: record, errorClass: error.errorClass, message: error.message,
                    topic: configuration.deadLetterTopic))
        }
    }

    /// The records to publish for a sent event: one outcome per device, then its invalid-token events,
    /// then the retry-topic record of pushes parked for their credential (which get no outcome yet).
    ///
    /// One pass over the plans, each outcome written once: this runs for every notification, and the
    /// intermediate arrays of (outcome, result) pairs it replaced cost a copy of each outcome's strings.
    @inline(never)
    func results(of prepared: PreparedEvent, sent: [DeliveryResult], source record: SourceRecord)
        -> (outputs: [OutboundRecord], outcomes: PublishedOutcomes)
    {
        let source = RecordSource(topic: record.topic, partition: record.partition, offset: record.offset)
        let key = Array(prepared.event.id.utf8)
        let now = WallClockTime.seconds()
        let deliveries = prepared.plan.deliveries
        var outputs: [OutboundRecord] = []
        outputs.reserveCapacity(deliveries.count)
        var outcomes = PublishedOutcomes(completedAt: now, keepingRecords: keepsOutcomeRecords)
        var invalidTokens: [OutboundRecord] = []
        var anyParked = false
        // Each push and result is read where it lies, by index: binding them to a pair copied (retained)
        // every field of both for every delivery.
        prepared.plan.forEachDelivery { delivery, pushIndex in
            // Pushes refused for their credential get no outcome yet: they are parked, below.
            if let pushIndex, sent[pushIndex].status == .credentialRefused {
                anyParked = true
                return
            }
            let outcome =
                if let pushIndex, case .send(let device) = delivery {
                    Self.outcome(
                        sentTo: device, prepared.plan.pushes[pushIndex], sent[pushIndex], event: prepared.event,
                        source: source, completedAt: now)
                } else {
                    Self.outcome(of: delivery, event: prepared.event, source: source, completedAt: now)
                }
            outputs.append(OutboundRecord(topic: configuration.outcomesTopic, key: key, value: outcome.jsonBytes))
            if let pushIndex,
                let invalid = invalidTokenRecord(
                    prepared.plan.pushes[pushIndex], sent[pushIndex], outcome, event: prepared.event)
            {
                invalidTokens.append(
                    OutboundRecord(
                        topic: configuration.invalidTokensTopic, key: Array(invalid.deviceToken.utf8),
                        value: invalid.json.compactBytes))
            }
            outcomes.append(outcome)
        }
        outputs.append(contentsOf: invalidTokens)
        if anyParked, let parked = parkedRecord(prepared, sent: sent, source: record) { outputs.append(parked) }
        return (outputs, outcomes)
    }

    /// The outcome of a push sent to `device`, from the push and its result.
    static func outcome(
        sentTo device: EventDevice, _ push: borrowing PlannedPush, _ result: borrowing DeliveryResult,
        event: PushEvent, source: RecordSource, completedAt now: Double
    ) -> OutcomeRecord {
        let last = result.attempts.last
        var outcome = OutcomeRecord(
            eventID: event.id, deviceToken: device.token, environment: device.environment,
            topic: push.request.topic, pushType: push.request.pushType.rawValue, ruleID: push.ruleID,
            status: OutcomeStatus(result.status), httpStatus: result.response?.status ?? last?.httpStatus,
            reason: result.expiryReason ?? result.response?.reason?.rawValue ?? last?.reason,
            apnsID: result.finalAPNsID, apnsUniqueID: result.response?.apnsUniqueID,
            attempts: result.attempts, source: source, completedAt: now, channelID: device.channelID)
        // Only a push sent again in the other environment (more than one attempt) answers from elsewhere.
        if result.attempts.count > 1 {
            let asked = EnvironmentsAsked(result, sentTo: push.request.environment)
            if asked.fellBack {
                outcome.environment = asked.final.rawValue
                outcome.environmentFallback = true
            }
        }
        return outcome
    }

    /// The outcome of a device's delivery that sent nothing: its skip or rejection.
    static func outcome(
        of delivery: PlannedDelivery, event: PushEvent, source: RecordSource, completedAt now: Double
    ) -> OutcomeRecord {
        switch delivery {
        case .send:
            // `results(of:sent:source:)` gives every delivery to send its push and result.
            preconditionFailure("a sent push without its delivery result")
        case .skip(let device, let reason, let ruleID, let topic, let pushType):
            return OutcomeRecord(
                eventID: event.id, deviceToken: device.token, environment: device.environment, topic: topic,
                pushType: pushType, ruleID: ruleID, status: .skipped, httpStatus: nil, reason: reason,
                apnsID: nil, apnsUniqueID: nil, attempts: [], source: source, completedAt: now,
                channelID: device.channelID)
        case .reject(let device, let reason, _, let ruleID, let topic, let pushType):
            return OutcomeRecord(
                eventID: event.id, deviceToken: device.token, environment: device.environment, topic: topic,
                pushType: pushType, ruleID: ruleID, status: .rejected, httpStatus: nil, reason: reason,
                apnsID: nil, apnsUniqueID: nil, attempts: [], source: source, completedAt: now,
                channelID: device.channelID)
        }
    }

    /// The invalid-token event for a push whose final answer proves its token invalid
    /// (`InvalidTokenRecord.invalidatingReason`), naming every environment that was asked.
    func invalidTokenRecord(
        _ push: borrowing PlannedPush, _ report: borrowing DeliveryResult, _ outcome: OutcomeRecord, event: PushEvent
    ) -> InvalidTokenRecord? {
        // A broadcast has no device token to invalidate: a deleted channel is reported in its outcome only.
        guard let token = push.request.deviceToken, let reason = InvalidTokenRecord.invalidatingReason(of: report)
        else { return nil }
        let asked = EnvironmentsAsked(report, sentTo: push.request.environment)
        return InvalidTokenRecord(
            deviceToken: token.hex, environment: asked.final.rawValue, topic: push.request.topic,
            app: push.app, reason: reason.rawValue, invalidSince: report.response?.timestamp?.timeIntervalSince1970,
            eventID: event.id, observedAt: outcome.completedAt,
            checkedEnvironments: asked.environments.map(\.rawValue))
    }
}

/// Why a record became a dead letter: it could not be decoded, or not planned.
struct PipelineInputError: Error {
    var errorClass: String
    var message: String

    static func decode(_ value: [UInt8]?) throws(PipelineInputError) -> PushEvent {
        do {
            return try PushEventDecoder.decode(value)
        } catch {
            throw PipelineInputError(errorClass: error.kind.rawValue, message: error.message)
        }
    }

    static func plan(_ event: PushEvent, with planner: any NotificationPlanner) throws(PipelineInputError)
        -> EventPlan
    {
        do {
            return try planner.plan(event, now: WallClockTime.seconds())
        } catch {
            throw PipelineInputError(errorClass: error.errorClass, message: error.message)
        }
    }
}
