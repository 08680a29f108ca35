// What can be wrong with a rules file, reported all at once with file:line:column, the rule it
// belongs to and, where there is one, what would be right.

/// One problem found while loading a rules file.
public struct RulesProblem: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var position: SourcePosition
    /// The `id` of the rule the problem is in, when it is in one.
    public var ruleID: String?
    public var message: String

    public init(file: String, position: SourcePosition, ruleID: String?, message: String) {
        self.file = file
        self.position = position
        self.ruleID = ruleID
        self.message = message
    }

    /// `rules.yaml:12:7: rule 'chat-message': unknown key 'thred_id'; did you mean 'thread_id'?`
    public var description: String {
        let rule = ruleID.map { "rule '\($0)': " } ?? ""
        return "\(file):\(position.line):\(position.column): \(rule)\(message)"
    }
}

/// A rules file that cannot be used, with every problem found in it, sorted by position.
public struct RulesLoadError: Error, Sendable, CustomStringConvertible {
    public var problems: [RulesProblem]

    public init(problems: [RulesProblem]) {
        self.problems = problems.sorted { ($0.position, $0.message) < ($1.position, $1.message) }
    }

    public var description: String {
        let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
        return (problems.map(\.description) + ["\(count) in \(problems.first?.file ?? "the rules file")"])
            .joined(separator: "\n")
    }
}
