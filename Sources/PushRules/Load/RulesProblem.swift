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

/// Suggestions for misspelt names: the closest candidate within a small edit distance.
enum Spelling {
    static func closest(to name: String, among candidates: some Sequence<String>) -> String? {
        let limit = max(2, name.count / 3)
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(name.lowercased(), candidate.lowercased())
            if distance <= limit, distance < (best?.1 ?? Int.max) { best = (candidate, distance) }
        }
        return best?.0
    }

    static func suggestion(for name: String, among candidates: some Sequence<String>) -> String {
        closest(to: name, among: candidates).map { " (did you mean '\($0)'?)" } ?? ""
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
