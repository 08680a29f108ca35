// A loaded, checked rules file: immutable and Sendable, shared by every worker task. `evaluate` is
// what the worker calls per event; `explain` backs `apns-worker rules explain`.

import APNs
import Foundation
public import JSON
import Synchronization

/// One rule, compiled. A class so that the matched rules of an event are collected without copying.
final class CompiledRule: Sendable {
    enum Action: Sendable {
        case send(PushPlan)
        /// Matched events get a `skipped_by_rule` outcome with this reason.
        case skip(String)
    }

    let id: String
    let position: SourcePosition
    let pattern: EventPattern
    let continues: Bool
    let action: Action

    init(id: String, position: SourcePosition, pattern: EventPattern, continues: Bool, action: Action) {
        self.id = id
        self.position = position
        self.pattern = pattern
        self.continues = continues
        self.action = action
    }
}

/// A compiled rules file.
///
/// - Important: Immutable and `Sendable`: share one instance across threads and tasks; swap in a
///   new one with `RulesStore` when the file changes.
public final class RuleSet: Sendable {
    /// The file it was loaded from, as given (for messages).
    public let file: String
    let rules: [CompiledRule]
    let index: RuleIndex
    let localization: Localization
    /// Compiled templates, for the summary.
    let templateCount: Int
    /// Request ids: a random seed per rule set and a counter, so ids cost no system call per request.
    private let idSeed: UInt64
    private let idCounter = Atomic<UInt64>(0)
    /// False renders every payload as a value tree (to compare the two ways in tests).
    let usesPayloadPrograms: Bool

    init(
        file: String, rules: [CompiledRule], localization: Localization, templateCount: Int,
        usesPayloadPrograms: Bool = true
    ) {
        self.file = file
        self.rules = rules
        self.index = RuleIndex(patterns: rules.map(\.pattern))
        self.localization = localization
        self.templateCount = templateCount
        self.usesPayloadPrograms = usesPayloadPrograms
        var generator = SystemRandomNumberGenerator()
        self.idSeed = generator.next()
    }

    /// The same rules, rendering every payload as a value tree.
    func withoutPayloadPrograms() -> RuleSet {
        RuleSet(
            file: file, rules: rules, localization: localization, templateCount: templateCount,
            usesPayloadPrograms: false)
    }

    /// The ids of the rules, in file order.
    public var ruleIDs: [String] { rules.map(\.id) }

    /// One line for logs and `rules check`: "rules.yaml: 23 rules, 3 locales (default en), 61 templates".
    public var summary: String {
        let locales =
            localization.tables.isEmpty
            ? "no locale tables"
            : "\(localization.tables.count) locale\(localization.tables.count == 1 ? "" : "s") "
                + "(default \(localization.tables[localization.defaultLocale]?.name ?? localization.defaultLocale))"
        return "\(file): \(rules.count) rule\(rules.count == 1 ? "" : "s"), \(locales), \(templateCount) templates"
    }

    /// Loads and checks a rules file (YAML, or JSON when the name ends in `.json`). Reads the file,
    /// so it blocks (compiling itself takes milliseconds for a few dozen rules).
    ///
    /// - Throws: `RulesLoadError` with every problem in the file, each with its line and column.
    public static func load(contentsOf path: String) throws(RulesLoadError) -> RuleSet {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw RulesLoadError(problems: [
                RulesProblem(
                    file: path, position: SourcePosition(line: 1, column: 1), ruleID: nil,
                    message: "the rules file \(reason)")
            ])
        }
        return try RuleSet(bytes: Array(data), file: path)
    }

    /// Parses and checks rules from text. `file` names the source in messages; a name ending in
    /// `.json` is read as strict JSON (YAML otherwise).
    public convenience init(text: String, file: String = "rules.yaml") throws(RulesLoadError) {
        try self.init(bytes: Array(text.utf8), file: file)
    }

    /// Parses and checks rules from UTF-8 bytes.
    public convenience init(bytes: [UInt8], file: String) throws(RulesLoadError) {
        let loaded = try RulesFileDecoder.load(bytes: bytes, file: file)
        self.init(
            file: file, rules: loaded.rules, localization: loaded.localization,
            templateCount: loaded.templateCount)
    }

    /// The largest rules file accepted, in bytes.
    public static let maximumFileSize = 4 << 20

    // MARK: - Evaluating events

    /// Decides what to send for one event: matches the rules in order, renders each matching rule's
    /// notification once per device, and checks every request with `APNsRequest.validate()`.
    ///
    /// - Parameters:
    ///   - event: the decoded event (`id`, `type`, `occurred_at`, `app`, `recipient`, `devices`, `data`,
    ///     `apns`).
    ///   - now: the current time in UNIX seconds; used for `ttl` when the event has no `occurred_at`
    ///     and to skip notifications that have already expired.
    /// - Returns: never empty: every device gets a decision (or the event one `no_devices` skip).
    /// - Important: Thread-safe and non-blocking; call it from any task. Pure CPU work, bounded by the
    ///   size of the event and the rules.
    public func evaluate(_ event: JSONValue, now: Int64) -> EventDecisions {
        evaluate(JSONTape(event), now: now)
    }

    /// `evaluate(_:now:)` for an event parsed as a tape (as the worker parses events): read where it lies.
    public func evaluate(_ event: JSONTape, now: Int64) -> EventDecisions {
        event.withRoot { evaluate(root: $0, now: now) }
    }

    private func evaluate(root event: JSONNode, now: Int64) -> EventDecisions {
        let rules = self.rules
        var matched: [CompiledRule] = []
        for ruleIndex in index.candidates(for: event) {
            // The trivial conditions read out of the rule: matching copies nothing (rule and pattern included).
            guard rules[ruleIndex].pattern.matching.matches(event) else { continue }
            let rule = rules[ruleIndex]
            matched.append(rule)
            if !rule.continues { break }
        }
        let matchedIDs = matched.map(\.id)
        // The targets where they lie, devices then channels, in room on the stack (a usual event has a few).
        let devices = event["devices"].flatMap { $0.isArray ? $0 : nil }
        let channels = event["channels"].flatMap { $0.isArray ? $0 : nil }
        let deviceCount = devices?.count ?? 0
        return withUnsafeTemporaryAllocation(of: JSONNode.self, capacity: deviceCount + (channels?.count ?? 0)) {
            room in
            var targetCount = 0
            for target in devices?.elements ?? JSONNode.Elements.none {
                (room.baseAddress! + targetCount).initialize(to: target)
                targetCount += 1
            }
            for target in channels?.elements ?? JSONNode.Elements.none {
                (room.baseAddress! + targetCount).initialize(to: target)
                targetCount += 1
            }
            return decide(
                event, matched: matched, matchedIDs: matchedIDs,
                targets: UnsafeBufferPointer(rebasing: room[..<targetCount]), deviceCount: deviceCount, now: now)
        }
    }

    /// The decisions for the targets (devices, then channels) of an event that `matched` rules match.
    private func decide(
        _ event: JSONNode, matched: [CompiledRule], matchedIDs: [String], targets: UnsafeBufferPointer<JSONNode>,
        deviceCount: Int, now: Int64
    ) -> EventDecisions {
        guard !targets.isEmpty else {
            return EventDecisions(
                decisions: [
                    .skip(
                        SkippedPush(
                            reason: .noDevices, ruleID: matched.first?.id, device: nil,
                            detail: "the event has no devices to send to"))
                ],
                matchedRuleIDs: matchedIDs)
        }
        // Devices, then broadcast channels: each is one target, with one decision per matching rule.
        // One array, sized once (two mapped arrays joined made three).
        var references: [DeviceReference] = []
        references.reserveCapacity(targets.count)
        for (index, target) in targets.enumerated() {
            references.append(
                index < deviceCount
                    ? DeviceReference(
                        index: index, token: target["token"]?.stringValue,
                        environment: target["environment"]?.stringValue)
                    : DeviceReference(
                        index: index - deviceCount, token: nil, environment: target["environment"]?.stringValue,
                        channelID: target["id"]?.stringValue ?? ""))
        }
        if matched.isEmpty {
            return EventDecisions(
                decisions: references.map {
                    .skip(
                        SkippedPush(
                            reason: .noRule, ruleID: nil, device: $0,
                            detail: "no rule matches events of type "
                                + (event["type"].map { ConditionExplanation.describe($0.value) } ?? "(none)")))
                },
                matchedRuleIDs: [])
        }

        // The locale chain costs a few lookups; work it out only when a matched rule reads it.
        let readsLocale = matched.contains { rule in
            if case .send(let plan) = rule.action { return plan.readsLocale }
            return false
        }
        let locale =
            readsLocale
            ? localization.resolve(event["recipient"]?["locale"]?.stringValue)
            : ResolvedLocale(tag: "", tables: [])
        let context = RenderContext(
            event: event, device: nil, locale: locale,
            eventTime: Self.eventTime(of: event, now: now))
        let overrides = EventOverrides(event["apns"]?.value)

        // Per rule, the request shared by all devices, validated once (nil when the rule reads `device`).
        var shared: [Result<PreparedRequest, PushPlan.Failure>?] = []
        shared.reserveCapacity(matched.count)
        for rule in matched {
            if case .send(let plan) = rule.action, !plan.readsDevice {
                shared.append(prepare(plan, context, overrides, now))
            } else {
                shared.append(nil)
            }
        }

        var ids = RequestIDs(seed: idSeed, counter: idCounter.add(1, ordering: .relaxed).oldValue)
        var decisions: [PushDecision] = []
        decisions.reserveCapacity(targets.count * matched.count)
        for deviceIndex in references.indices {
            let reference = references[deviceIndex]
            for ruleIndex in matched.indices {
                let rule = matched[ruleIndex]
                switch rule.action {
                case .skip(let reason):
                    decisions.append(
                        .skip(
                            SkippedPush(
                                reason: .rule, ruleID: rule.id, device: reference,
                                detail: reason)))
                case .send(let plan):
                    let prepared: Result<PreparedRequest, PushPlan.Failure>
                    if let cached = shared[ruleIndex] {
                        prepared = cached
                    } else {
                        var deviceContext = context
                        deviceContext.device = targets[deviceIndex]
                        prepared = prepare(plan, deviceContext, overrides, now)
                    }
                    decisions.append(
                        Self.decision(
                            rule: rule, pushType: plan.pushType, prepared: prepared,
                            reference: reference, ids: &ids))
                }
            }
        }
        return EventDecisions(decisions: decisions, matchedRuleIDs: matchedIDs)
    }

    /// A request for a stand-in device, validated; each device gets a copy with its token.
    struct PreparedRequest {
        var request: APNsRequest
        var notes: [String]
    }

    private static let standInToken = try! DeviceToken(bytes: [UInt8](repeating: 0, count: 32))

    private func prepare(
        _ plan: PushPlan, _ context: RenderContext, _ overrides: EventOverrides,
        _ now: Int64
    ) -> Result<PreparedRequest, PushPlan.Failure> {
        let parts: PushPlan.Rendered
        switch plan.render(context, overrides: overrides, now: now, usingProgram: usesPayloadPrograms) {
        case .success(let value): parts = value
        case .failure(let failure): return .failure(failure)
        }
        var notes = parts.notes
        let payload: JSONValue
        var programShape: UInt64?
        switch parts.payload {
        case .value(let value):
            payload = value
        case .program(let output):
            let shape = output.shape | (APNsPayload.isWebTopic(parts.topic) ? 1 << 60 : 0)
            if plan.isCleanShape(shape) {
                // The value tree is made only if something reads it (explaining a decision, not sending),
                // from what the leaves gave: a request does not keep the event alive.
                var request = APNsRequest(
                    deviceToken: Self.standInToken, environment: .production, topic: parts.topic,
                    pushType: plan.pushType, priority: parts.priority, expiration: parts.expiration,
                    collapseID: parts.collapseID, apnsID: APNsID(high: 0, low: 0), payloadBytes: output.bytes,
                    knownPayloadProblems: []
                ) { output.value(of: plan.payload) }
                let problems = request.validateRemembering()
                if !problems.isEmpty { return .failure(.reject(.invalidRequest, problems.map(\.description))) }
                return .success(PreparedRequest(request: request, notes: notes))
            }
            // A shape not seen yet, or one the checks found problems in: the value tree is checked.
            do { payload = try plan.payload.render(context) } catch {
                return .failure(.reject(.templateError, [error.message]))
            }
            programShape = shape
        }
        var request = APNsRequest(
            deviceToken: Self.standInToken, environment: .production, topic: parts.topic, pushType: plan.pushType,
            priority: parts.priority, expiration: parts.expiration, collapseID: parts.collapseID,
            apnsID: APNsID(high: 0, low: 0), payload: payload)
        // What validate() checks does not depend on the device, so once serves every device; the copies
        // made per device remember the answer, so the sender's own check of each is a lookup.
        var problems = request.validateRemembering()
        if let programShape, request.payloadProblems.isEmpty { plan.rememberCleanShape(programShape) }
        if problems.contains(where: { $0.code == .payloadTooLarge }) {
            switch plan.fit(payload) {
            case .success(let fitted):
                request.payload = fitted.payload
                notes += fitted.notes
                problems = request.validateRemembering()
            case .failure(let failure):
                return .failure(failure)
            }
        }
        if !problems.isEmpty { return .failure(.reject(.invalidRequest, problems.map(\.description))) }
        return .success(PreparedRequest(request: request, notes: notes))
    }

    private static func decision(
        rule: CompiledRule, pushType: PushType, prepared: Result<PreparedRequest, PushPlan.Failure>,
        reference: DeviceReference, ids: inout RequestIDs
    ) -> PushDecision {
        let shared: PreparedRequest
        switch prepared {
        case .success(let value): shared = value
        case .failure(.reject(let reason, let problems)):
            return .reject(
                RejectedPush(
                    reason: reason, ruleID: rule.id, device: reference, pushType: pushType,
                    problems: problems))
        case .failure(.skip(let reason, let detail)):
            return .skip(
                SkippedPush(
                    reason: reason, ruleID: rule.id, device: reference, pushType: pushType,
                    detail: detail))
        }
        if let channel = reference.channelID {
            return broadcastDecision(
                rule: rule, pushType: pushType, shared: shared, reference: reference, channel: channel, ids: &ids)
        }
        var problems: [String] = []
        var token: DeviceToken?
        var environment: APNsEnvironment?
        if let text = reference.token {
            do { token = try DeviceToken(text) } catch {
                problems.append("devices[\(reference.index)].token: \(error.message)")
            }
        } else {
            problems.append("devices[\(reference.index)] has no token (a hex text)")
        }
        if let text = reference.environment {
            switch text {
            case "production": environment = .production
            case "sandbox", "development": environment = .sandbox
            default:
                do { environment = try APNsEnvironment(parsing: text) } catch {
                    problems.append("devices[\(reference.index)].environment: \(error.message)")
                }
            }
        } else {
            problems.append("devices[\(reference.index)] has no environment (production or sandbox)")
        }
        guard let token, let environment else {
            return .reject(
                RejectedPush(
                    reason: .invalidDevice, ruleID: rule.id, device: reference,
                    pushType: pushType, problems: problems))
        }
        var request = shared.request
        request.target = .device(token)
        request.environment = environment
        request.apnsID = ids.next()
        return .send(PreparedPush(ruleID: rule.id, device: reference, request: request, notes: shared.notes))
    }

    /// `occurred_at` in UNIX seconds; `now` when the event has none.
    static func eventTime(of event: JSONNode, now: Int64) -> Result<Int64, TemplateRenderError> {
        guard let value = event["occurred_at"], !value.isNull else { return .success(now) }
        if let seconds = Timestamp.unixSeconds(rfc3339: value) {
            return .success(seconds)
        }
        return .failure(
            TemplateRenderError(
                "the event's occurred_at is \(ConditionExplanation.describe(value.value)), not an RFC 3339 time such as "
                    + "2026-11-29T12:00:00Z"))
    }

    // MARK: - Explaining

    /// For each rule in order: whether it matches `event` and, condition by condition, why (not).
    public func explain(_ event: JSONValue) -> [RuleExplanation] {
        JSONTape(event).withRoot { explain(root: $0) }
    }

    private func explain(root event: JSONNode) -> [RuleExplanation] {
        var reached = true
        return rules.map { rule in
            let conditions = rule.pattern.explain(event)
            let matched = conditions.allSatisfy(\.matched)
            let explanation = RuleExplanation(
                ruleID: rule.id, position: rule.position, matched: matched, reached: reached,
                continues: rule.continues, conditions: conditions)
            if matched && !rule.continues { reached = false }
            return explanation
        }
    }
}

/// Version 4 UUIDs for `apns-id` from SplitMix64 over a random seed and a per-event counter: unique
/// in practice and cheap. They are placeholders in any case: the sender sets a fresh id per attempt.
struct RequestIDs {
    private var state: UInt64

    /// Each event starts at a scrambled point of the sequence, so two events' ids never line up.
    init(seed: UInt64, counter: UInt64) {
        state = Self.mix(seed ^ Self.mix(counter))
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func nextWord() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        return Self.mix(state)
    }

    mutating func next() -> APNsID {
        let high = nextWord() & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000
        let low = nextWord() & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
        return APNsID(high: high, low: low)
    }
}
