// A record's way from bytes to results: decode and plan it (or make it a dead letter), send its pushes,
// and build its outcomes and invalid-token events.

import APNs
import Platform

extension Pipeline {
    func process(_ record: SourceRecord, generation: UInt64, withdrawal: SendWithdrawal) async {
        // Decoding, planning and building the results are synchronous helpers, never inlined here: only
        // what lives across the one await is in this async frame, which then fits the lane task's first
        // allocator slab (frames beyond it cost a malloc and a free per record). An async frame holds
        // the locals of everything inlined into it for the whole round trip to APNs: `results` inlined
        // took it from 480 to 816 bytes.
        // A parked record's wait for its time is a wait like a retry's: a revoke or a drain ends it, unsent.
        if record.topic == configuration.retryTopic, !(await waitUntilDue(record, unless: withdrawal)) {
            return recordWithdrawn(record, generation: generation)
        }
        // Its partition's revoke or the drain has let go of its records (their wait is over): none of this
        // record's pushes is sent, and its next owner does the record. A record taken before a revoke or a
        // drain began, and starting while it waits, goes on like those already running: handing it over
        // would make the next owner redo the records behind it that finished (pushes sent twice).
        if withdrawal.isClosed { return recordWithdrawn(record, generation: generation) }
        switch prepare(record) {
        case .deadLetter(let output):
            publishDeadLetter(output, of: record, generation: generation)
        case .ready(let prepared):
            let sent = await transport.deliverAll(prepared.plan.pushes[...], withdrawal: withdrawal)
            publishResults(of: prepared, sent: sent, source: record, generation: generation)
        }
    }

    /// `process` without a task, on an event loop (`recordRunner`): the same steps, with the wait for the
    /// pushes a callback. Never for a retry-topic record, whose wait for its time needs a task.
    func begin(_ taken: TakenRecord) {
        let record = taken.record
        let generation = taken.generation
        if taken.withdrawal.isClosed { return recordWithdrawn(record, generation: generation) }
        switch prepare(record) {
        case .deadLetter(let output):
            publishDeadLetter(output, of: record, generation: generation)
        case .ready(let prepared):
            // Moved into the completion, not copied: capturing the prepared event copied it, a retain and a
            // release for each field of the event and its plan.
            let pushes = prepared.plan.pushes[...]
            transport.beginDeliverAll(pushes, withdrawal: taken.withdrawal) {
                [self, prepared = consume prepared, record = consume record] sent in
                publishResults(of: prepared, sent: sent, source: record, generation: generation)
            }
        }
    }

    /// A record with a push its partition's withdrawal took back (a revoke, a drain): it publishes nothing
    /// and stays unfinished, so that neither its offset nor a later one is stored; its partition's next
    /// owner does it in full. It stops counting against the in-flight cap, and the revoke or drain stops
    /// waiting for it.
    @inline(never)
    func recordWithdrawn(_ record: SourceRecord, generation: UInt64) {
        let partition = record.topicPartition
        let appliesSteps = state.withLock { state -> Bool in
            state.counters.withdrawn += 1
            if state.tracker.generation(of: partition) == generation {
                state.withdrawnUnfinished[partition, default: 0] += 1
            }
            state.reportRunning(state.recordStoppedCounting())
            return state.hasFlowSteps
        }
        if appliesSteps { applyFlowSteps() }
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
        // A record with a withdrawn push publishes nothing, not even the outcomes of its other pushes.
        // The statuses read where the results lie: `contains(where:)` copied each result to its predicate, a
        // retain and a release for every field of the result, its response and its attempts.
        let anyWithdrawn = sent.withUnsafeBufferPointer { results in
            results.indices.contains { results[$0].status == .withdrawn }
        }
        if anyWithdrawn { return recordWithdrawn(record, generation: generation) }
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
        // Each push and result is read where it lies, through buffer pointers (whose elements are borrowed
        // in place; an array's subscript returns a copy, a retain per field of each), and each outcome is
        // written in the branch that made it (a value chosen by an `if` expression was copied out of it).
        prepared.plan.pushes.withUnsafeBufferPointer { pushes in
            sent.withUnsafeBufferPointer { sent in
                prepared.plan.forEachDelivery { delivery, pushIndex in
                    guard let pushIndex, case .send(let device) = delivery else {
                        let outcome = Self.outcome(
                            of: delivery, event: prepared.event, source: source, completedAt: now)
                        outputs.append(
                            OutboundRecord(topic: configuration.outcomesTopic, key: key, value: outcome.jsonBytes))
                        outcomes.append(outcome)
                        return
                    }
                    // Pushes refused for their credential get no outcome yet: they are parked, below.
                    if sent[pushIndex].status == .credentialRefused {
                        anyParked = true
                        return
                    }
                    let push = pushes.baseAddress! + pushIndex
                    let result = sent.baseAddress! + pushIndex
                    let outcome = Self.writeOutcome(
                        sentTo: device, push, result, event: prepared.event, source: source, completedAt: now,
                        into: &outcomes)
                    outputs.append(OutboundRecord(topic: configuration.outcomesTopic, key: key, value: outcome))
                    if let invalid = invalidTokenRecord(push, result, event: prepared.event, observedAt: now) {
                        invalidTokens.append(
                            OutboundRecord(
                                topic: configuration.invalidTokensTopic, key: Array(invalid.deviceToken.utf8),
                                value: invalid.json.compactBytes))
                    }
                }
            }
        }
        outputs.append(contentsOf: invalidTokens)
        if anyParked, let parked = parkedRecord(prepared, sent: sent, source: record) { outputs.append(parked) }
        return (outputs, outcomes)
    }

    /// The outcome of a push sent to `device`, from the push and its result: its JSON, counted in
    /// `outcomes` (with its record, when they keep records).
    ///
    /// Both are read through pointers, field by field: a push or result passed by value (or borrowed from
    /// an array) was copied whole first, a retain and a release for every field of both. The JSON is
    /// written from those fields where they lie, without a record to hold them.
    @inline(never)
    static func writeOutcome(
        sentTo device: EventDevice, _ push: UnsafePointer<PlannedPush>, _ result: UnsafePointer<DeliveryResult>,
        event: PushEvent, source: RecordSource, completedAt now: Double, into outcomes: inout PublishedOutcomes
    ) -> [UInt8] {
        let last = result.pointee.attempts.last
        // Only a push sent again in the other environment (more than one attempt) answers from elsewhere.
        var environment = device.environment
        var fellBack = false
        if result.pointee.attempts.count > 1 {
            let asked = EnvironmentsAsked(result.pointee, sentTo: push.pointee.request.environment)
            if asked.fellBack {
                environment = asked.final.rawValue
                fellBack = true
            }
        }
        let status = OutcomeStatus(result.pointee.status)
        let (bytes, kept) = OutcomeRecord.jsonBytes(
            eventID: event.id, deviceToken: device.token, environment: environment,
            topic: push.pointee.request.topic, pushType: push.pointee.request.pushType.rawValue,
            ruleID: push.pointee.ruleID, status: status,
            httpStatus: result.pointee.response?.status ?? last?.httpStatus,
            reason: result.pointee.expiryReason ?? result.pointee.response?.reason?.rawValue ?? last?.reason,
            apnsID: result.pointee.finalAPNsID, apnsUniqueID: result.pointee.response?.uniqueID,
            attempts: result.pointee.attempts, source: source, completedAt: now,
            environmentFallback: fellBack, channelID: device.channelID, keepingRecord: outcomes.keepsRecords)
        if let kept { outcomes.append(kept) } else { outcomes.count(status) }
        return bytes
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
    /// (`InvalidTokenRecord.invalidatingReason`), naming every environment that was asked. Read through
    /// pointers, as `writeOutcome(sentTo:_:_:event:source:completedAt:into:)` reads them.
    @inline(never)
    func invalidTokenRecord(
        _ push: UnsafePointer<PlannedPush>, _ result: UnsafePointer<DeliveryResult>, event: PushEvent,
        observedAt now: Double
    ) -> InvalidTokenRecord? {
        // A broadcast has no device token to invalidate: a deleted channel is reported in its outcome only.
        guard let token = push.pointee.request.deviceToken,
            let reason = InvalidTokenRecord.invalidatingReason(of: result.pointee)
        else { return nil }
        let asked = EnvironmentsAsked(result.pointee, sentTo: push.pointee.request.environment)
        return InvalidTokenRecord(
            deviceToken: token.hex, environment: asked.final.rawValue, topic: push.pointee.request.topic,
            app: push.pointee.app, reason: reason.rawValue,
            invalidSince: result.pointee.response?.timestamp?.timeIntervalSince1970, eventID: event.id,
            observedAt: now, checkedEnvironments: asked.environments.map(\.rawValue))
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
