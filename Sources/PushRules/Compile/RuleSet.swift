// A loaded, checked rules file: immutable and Sendable, shared by every worker task. `evaluate` is
// what the worker calls per event; `explain` backs `apns-worker rules explain`.
public import APNs
import Foundation

/// One rule, compiled.
struct CompiledRule: Sendable {
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
}

/// A compiled rules file.
///
/// - Important: Immutable and `Sendable`: share one instance across threads and tasks; swap in a
///   new one with `RulesStore` when the file changes.
public final class RuleSet: Sendable {
    /// The file it was loaded from, as given (for messages).
    public let file: String
    let rules: [CompiledRule]
    let localization: Localization
    /// Compiled templates, for the summary.
    let templateCount: Int

    init(file: String, rules: [CompiledRule], localization: Localization, templateCount: Int) {
        self.file = file
        self.rules = rules
        self.localization = localization
        self.templateCount = templateCount
    }

    /// The ids of the rules, in file order.
    public var ruleIDs: [String] { rules.map(\.id) }

    /// One line for logs and `rules check`: "rules.yaml: 23 rules, 3 locales (default en), 61 templates".
    public var summary: String {
        let locales = localization.tables.isEmpty ? "no locale tables"
            : "\(localization.tables.count) locale\(localization.tables.count == 1 ? "" : "s") "
                + "(default \(localization.tables[localization.defaultLocale]?.name ?? localization.defaultLocale))"
        return "\(file): \(rules.count) rule\(rules.count == 1 ? "" : "s"), \(locales), \(templateCount) templates"
    }

    /// Loads and checks a rules file (YAML, or JSON when the name ends in `.json`).
    ///
    /// - Throws: `RulesLoadError` with every problem in the file, each with its line and column.
    public static func load(contentsOf path: String) throws(RulesLoadError) -> RuleSet {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw RulesLoadError(problems: [RulesProblem(
                file: path, position: SourcePosition(line: 1, column: 1), ruleID: nil,
                message: "the rules file \(reason)")])
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
        self.init(file: file, rules: loaded.rules, localization: loaded.localization,
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
        var matched: [CompiledRule] = []
        for rule in rules where rule.pattern.matches(event) {
            matched.append(rule)
            if !rule.continues { break }
        }
        let matchedIDs = matched.map(\.id)
        guard case .array(let devices)? = event["devices"], !devices.isEmpty else {
            return EventDecisions(
                decisions: [.skip(SkippedPush(
                    reason: .noDevices, ruleID: matched.first?.id, device: nil,
                    detail: "the event has no devices to send to"))],
                matchedRuleIDs: matchedIDs)
        }
        let references = devices.enumerated().map { index, device in
            DeviceReference(index: index, token: device["token"]?.stringValue,
                            environment: device["environment"]?.stringValue)
        }
        if matched.isEmpty {
            return EventDecisions(
                decisions: references.map {
                    .skip(SkippedPush(reason: .noRule, ruleID: nil, device: $0,
                                      detail: "no rule matches events of type "
                                        + (event["type"].map { ConditionExplanation.describe($0) } ?? "(none)")))
                },
                matchedRuleIDs: [])
        }

        let context = RenderContext(
            event: event, device: .null, locale: localization.resolve(event["recipient"]?["locale"]?.stringValue),
            eventTime: Self.eventTime(of: event, now: now))
        let overrides = EventOverrides(event["apns"])

        // Per rule, the rendering shared by all devices (nil when the rule reads `device`).
        var shared: [Result<PushPlan.Rendered, PushPlan.Failure>?] = []
        shared.reserveCapacity(matched.count)
        for rule in matched {
            if case .send(let plan) = rule.action, !plan.readsDevice {
                shared.append(plan.render(context, overrides: overrides, now: now))
            } else {
                shared.append(nil)
            }
        }

        var decisions: [PushDecision] = []
        decisions.reserveCapacity(devices.count * matched.count)
        for (deviceIndex, device) in devices.enumerated() {
            let reference = references[deviceIndex]
            for (ruleIndex, rule) in matched.enumerated() {
                switch rule.action {
                case .skip(let reason):
                    decisions.append(.skip(SkippedPush(reason: .rule, ruleID: rule.id, device: reference,
                                                       detail: reason)))
                case .send(let plan):
                    let rendered: Result<PushPlan.Rendered, PushPlan.Failure>
                    if let cached = shared[ruleIndex] {
                        rendered = cached
                    } else {
                        var deviceContext = context
                        deviceContext.device = device
                        rendered = plan.render(deviceContext, overrides: overrides, now: now)
                    }
                    decisions.append(Self.decision(rule: rule, plan: plan, rendered: rendered, device: device,
                                                   reference: reference))
                }
            }
        }
        return EventDecisions(decisions: decisions, matchedRuleIDs: matchedIDs)
    }

    private static func decision(
        rule: CompiledRule, plan: PushPlan, rendered: Result<PushPlan.Rendered, PushPlan.Failure>,
        device: JSONValue, reference: DeviceReference
    ) -> PushDecision {
        let parts: PushPlan.Rendered
        switch rendered {
        case .success(let value): parts = value
        case .failure(.reject(let reason, let problems)):
            return .reject(RejectedPush(reason: reason, ruleID: rule.id, device: reference, problems: problems))
        case .failure(.skip(let reason, let detail)):
            return .skip(SkippedPush(reason: reason, ruleID: rule.id, device: reference, detail: detail))
        }
        var problems: [String] = []
        var token: DeviceToken?
        var environment: APNsEnvironment?
        if let text = reference.token {
            do { token = try DeviceToken(text) } catch { problems.append("devices[\(reference.index)].token: \(error.message)") }
        } else {
            problems.append("devices[\(reference.index)] has no token (a hex text)")
        }
        if let text = reference.environment {
            do { environment = try APNsEnvironment(parsing: text) } catch {
                problems.append("devices[\(reference.index)].environment: \(error.message)")
            }
        } else {
            problems.append("devices[\(reference.index)] has no environment (production or sandbox)")
        }
        guard let token, let environment else {
            _ = device
            return .reject(RejectedPush(reason: .invalidDevice, ruleID: rule.id, device: reference, problems: problems))
        }
        let request = APNsRequest(
            deviceToken: token, environment: environment, topic: parts.topic, pushType: plan.pushType,
            priority: parts.priority, expiration: parts.expiration, collapseID: parts.collapseID,
            payload: parts.payload)
        let invalid = request.validate()
        if !invalid.isEmpty {
            return .reject(RejectedPush(
                reason: .invalidRequest, ruleID: rule.id, device: reference, problems: invalid.map(\.description)))
        }
        return .send(PreparedPush(ruleID: rule.id, device: reference, request: request, notes: parts.notes))
    }

    /// `occurred_at` in UNIX seconds; `now` when the event has none.
    static func eventTime(of event: JSONValue, now: Int64) -> Result<Int64, TemplateRenderError> {
        guard let value = event["occurred_at"], !value.isNull else { return .success(now) }
        if case .string(let text) = value, let seconds = Timestamp.unixSeconds(rfc3339: text) {
            return .success(seconds)
        }
        return .failure(TemplateRenderError(
            "the event's occurred_at is \(ConditionExplanation.describe(value)), not an RFC 3339 time such as "
                + "2026-11-29T12:00:00Z"))
    }

    // MARK: - Explaining

    /// For each rule in order: whether it matches `event` and, condition by condition, why (not).
    public func explain(_ event: JSONValue) -> [RuleExplanation] {
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
