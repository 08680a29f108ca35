// Turns a parsed rules file into a RuleSet, checking everything and collecting every problem (with
// its position, its rule and what would be right) instead of stopping at the first.

import APNs
import JSON

struct RulesFileDecoder {
    struct Loaded {
        var rules: [CompiledRule]
        var localization: Localization
        var templateCount: Int
    }

    static let topLevelKeys = ["version", "defaults", "localization", "rules"]
    static let ruleOnlyKeys = ["id", "description", "match", "continue", "skip"]

    let file: String
    var problems: [RulesProblem] = []
    private var reported: Set<String> = []
    /// The rule being decoded, for problems.
    var ruleID: String?
    /// Literal keys given to `| t`, checked against the locale tables at the end.
    var translationUses: [(key: String, position: SourcePosition, ruleID: String?)] = []
    var templateCount = 0
    /// Set while compiling locale strings, which may not use `t` themselves.
    var compilingLocaleString = false

    init(file: String) { self.file = file }

    static func load(bytes: [UInt8], file: String) throws(RulesLoadError) -> Loaded {
        func fail(_ position: SourcePosition, _ message: String) -> RulesLoadError {
            RulesLoadError(problems: [RulesProblem(file: file, position: position, ruleID: nil, message: message)])
        }
        if bytes.count > RuleSet.maximumFileSize {
            throw fail(
                .init(line: 1, column: 1),
                "the file is \(bytes.count) bytes; rules files are limited to \(RuleSet.maximumFileSize)")
        }
        if file.lowercased().hasSuffix(".json") {
            do { _ = try JSONValue(parsing: bytes) } catch {
                throw fail(.init(line: error.line, column: error.column), "not valid JSON: \(error.message)")
            }
        }
        let root: SourceNode
        do { root = try YAMLReader.read(bytes) } catch { throw fail(error.position, error.message) }
        var decoder = RulesFileDecoder(file: file)
        let loaded = decoder.decodeFile(root)
        if !decoder.problems.isEmpty { throw RulesLoadError(problems: decoder.problems) }
        return loaded
    }

    // MARK: - Reporting

    mutating func report(_ position: SourcePosition, _ message: String) {
        // The same field from `defaults` can be checked once per rule; say it once.
        guard reported.insert("\(position) \(message)").inserted else { return }
        problems.append(RulesProblem(file: file, position: position, ruleID: ruleID, message: message))
    }

    /// Reports keys of `node` that are not in `allowed`, suggesting the closest allowed one.
    mutating func checkKeys(_ entries: [SourceEntry], allowed: [String], in place: String) {
        for entry in entries where !allowed.contains(entry.key) {
            let suggestion = Spelling.closest(to: entry.key, among: allowed)
            let hint =
                suggestion.map { "; did you mean '\($0)'?" }
                ?? "; \(place) takes " + allowed.joined(separator: ", ")
            report(entry.keyPosition, "unknown key '\(entry.key)' in \(place)\(hint)")
        }
    }

    mutating func mapping(_ node: SourceNode, _ what: String, example: String) -> [SourceEntry]? {
        guard let entries = node.entries else {
            report(node.position, "\(what) must be a mapping, found \(node.kindDescription); e.g. \(example)")
            return nil
        }
        return entries
    }

    // MARK: - The file

    mutating func decodeFile(_ root: SourceNode) -> Loaded {
        var loaded = Loaded(rules: [], localization: .none, templateCount: 0)
        guard let entries = mapping(root, "a rules file", example: "version: 1, rules: [...]") else { return loaded }
        checkKeys(entries, allowed: Self.topLevelKeys, in: "the rules file")

        if let version = root.entry("version") {
            if version.value.scalarValue != .int(1) {
                report(
                    version.value.position,
                    "version is \(describeScalar(version.value)); this apns-worker reads version: 1")
            }
        } else {
            report(root.position, "the rules file needs 'version: 1' at the top")
        }

        if let localization = root.entry("localization") {
            loaded.localization = decodeLocalization(localization.value)
        }

        var defaults: [String: FieldSource] = [:]
        if let defaultsEntry = root.entry("defaults"),
            let entries = mapping(
                defaultsEntry.value, "defaults", example: "defaults: {push_type: alert, ttl: 1h}")
        {
            checkKeys(entries, allowed: PushField.allNames, in: "defaults")
            for entry in entries
            where PushField.allNames.contains(entry.key) && entry.value.scalarValue?.isNull != true {
                defaults[entry.key] = FieldSource(entry: entry, fromDefaults: true)
            }
            // Check the defaults on their own too, so a mistake there is found even if no rule uses it.
            _ = decodePushPlan(defaults, at: defaultsEntry.value.position, checkingDefaultsOnly: true)
        }

        if let rulesEntry = root.entry("rules") {
            loaded.rules = decodeRules(rulesEntry.value, defaults: defaults)
        } else {
            report(root.position, "the rules file needs a 'rules' list")
        }

        checkTranslationUses(loaded.localization)
        loaded.templateCount = templateCount
        return loaded
    }

    mutating func decodeRules(_ node: SourceNode, defaults: [String: FieldSource]) -> [CompiledRule] {
        guard let elements = node.elements else {
            report(
                node.position,
                "rules must be a list of rules (each starting with '- id: ...'), found "
                    + node.kindDescription)
            return []
        }
        if elements.isEmpty {
            report(node.position, "rules is empty; every event would be skipped with no_rule")
        }
        var rules: [CompiledRule] = []
        var seenIDs: [String: SourcePosition] = [:]
        var catchAll: (id: String?, position: SourcePosition)?
        for element in elements {
            ruleID = element.entry("id")?.value.scalarValue?.stringValue
            defer { ruleID = nil }
            guard let entries = mapping(element, "a rule", example: "- id: chat-message\n  match: {type: chat.message}")
            else { continue }
            checkKeys(entries, allowed: Self.ruleOnlyKeys + PushField.allNames, in: "a rule")

            let id = decodeRuleID(element, seen: &seenIDs)
            if let catchAll {
                let earlier =
                    catchAll.id.map { "rule '\($0)' (line \(catchAll.position.line))" }
                    ?? "the rule at line \(catchAll.position.line)"
                report(
                    element.position,
                    "this rule can never match: \(earlier) matches every event and does not "
                        + "continue")
            }

            var pattern = EventPattern(conditions: [])
            if let match = element.entry("match") {
                pattern = EventPattern(conditions: decodePattern(match.value, prefix: []))
            } else {
                report(element.position, "a rule needs 'match'; use match: {} to match every event")
            }

            var continues = false
            if let entry = element.entry("continue") {
                if let flag = entry.value.scalarValue?.boolValue, !entry.value.isYAML11OnlyBoolean {
                    continues = flag
                } else {
                    report(entry.value.position, "continue must be true or false, found \(describeScalar(entry.value))")
                }
            }
            if let description = element.entry("description"), description.value.scalarValue?.stringValue == nil {
                report(description.value.position, "description must be text")
            }

            let action: CompiledRule.Action?
            if let skip = element.entry("skip") {
                action = decodeSkip(skip, ruleEntries: entries)
            } else {
                var fields = defaults
                for entry in entries where PushField.allNames.contains(entry.key) {
                    // `sound: null` in a rule removes the default's sound.
                    let isNull = entry.value.scalarValue?.isNull == true
                    fields[entry.key] = isNull ? nil : FieldSource(entry: entry, fromDefaults: false)
                }
                action = decodePushPlan(fields, at: element.position, checkingDefaultsOnly: false).map { .send($0) }
            }
            if let id, let action {
                rules.append(
                    CompiledRule(
                        id: id, position: element.position, pattern: pattern, continues: continues,
                        action: action))
            }
            if element.entry("match")?.value.entries?.isEmpty == true, !continues, catchAll == nil {
                catchAll = (id, element.position)
            }
        }
        return rules
    }

    mutating func decodeRuleID(_ rule: SourceNode, seen: inout [String: SourcePosition]) -> String? {
        guard let entry = rule.entry("id") else {
            report(rule.position, "a rule needs an 'id' (letters, digits, '.', '_', '-'), e.g. id: chat-message")
            return nil
        }
        guard let id = entry.value.scalarValue?.stringValue else {
            report(entry.value.position, "id must be text, found \(describeScalar(entry.value))")
            return nil
        }
        let valid =
            !id.isEmpty && id.utf8.count <= 64 && id.utf8.first.map { isAlphanumeric($0) } == true
            && id.utf8.allSatisfy {
                isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                    || $0 == UInt8(ascii: "-")
            }
        if !valid {
            report(
                entry.value.position,
                "id '\(id)' must be 1 to 64 letters, digits, '.', '_' or '-', "
                    + "starting with a letter or digit")
        }
        if let earlier = seen[id] {
            report(
                entry.value.position,
                "duplicate rule id '\(id)' (first at line \(earlier.line)); ids must be unique")
        } else {
            seen[id] = entry.value.position
        }
        return id
    }

    mutating func decodeSkip(_ skip: SourceEntry, ruleEntries: [SourceEntry]) -> CompiledRule.Action? {
        for entry in ruleEntries where PushField.allNames.contains(entry.key) {
            report(entry.keyPosition, "a rule with 'skip' sends nothing, so '\(entry.key)' has no effect; remove it")
        }
        guard let reason = skip.value.scalarValue?.stringValue, !reason.isEmpty else {
            report(
                skip.value.position,
                "skip takes the reason the outcome will carry, e.g. skip: \"user muted the thread\"")
            return nil
        }
        return .skip(reason)
    }

    // MARK: - Localization

    mutating func decodeLocalization(_ node: SourceNode) -> Localization {
        let example = "localization: {default_locale: en, tables: {en: {greeting: Hello}}}"
        guard let entries = mapping(node, "localization", example: example) else { return .none }
        checkKeys(entries, allowed: ["default_locale", "tables"], in: "localization")
        guard let tablesEntry = node.entry("tables") else {
            report(node.position, "localization needs 'tables', a mapping from locale to strings; e.g. \(example)")
            return .none
        }
        guard let tableEntries = mapping(tablesEntry.value, "localization.tables", example: "tables: {en: {...}}")
        else { return .none }

        var tables: [String: LocaleTable] = [:]
        var positions: [String: SourcePosition] = [:]
        var rawKeys: [String: [(key: String, position: SourcePosition)]] = [:]
        for entry in tableEntries {
            let tag = Localization.normalize(entry.key)
            if !isLocaleTag(entry.key) {
                report(entry.keyPosition, "'\(entry.key)' is not a locale tag; use a BCP 47 tag such as en, fr, fr-CA")
                continue
            }
            if let earlier = positions[tag] {
                report(entry.keyPosition, "locale '\(entry.key)' repeats the one at line \(earlier.line)")
                continue
            }
            positions[tag] = entry.keyPosition
            var strings: [String: Template] = [:]
            var keys: [(String, SourcePosition)] = []
            flattenStrings(entry.value, prefix: "", into: &strings, keys: &keys)
            tables[tag] = LocaleTable(tag: tag, name: entry.key, strings: strings)
            rawKeys[tag] = keys
        }

        var defaultTag = ""
        if let defaultEntry = node.entry("default_locale") {
            if let text = defaultEntry.value.scalarValue?.stringValue {
                defaultTag = Localization.normalize(text)
                if tables[defaultTag] == nil, !tables.isEmpty {
                    let names = tables.values.map(\.name).sorted()
                    report(
                        defaultEntry.value.position,
                        "default_locale '\(text)' has no table"
                            + Spelling.suggestion(for: text, among: names) + "; tables: "
                            + names.joined(separator: ", "))
                }
            } else {
                report(defaultEntry.value.position, "default_locale must be a locale tag such as en")
            }
        } else {
            report(node.position, "localization needs 'default_locale', the locale every lookup falls back to")
        }

        // Every key must resolve for every recipient, so every key must be in the default table.
        if let defaultTable = tables[defaultTag] {
            for (tag, keys) in rawKeys where tag != defaultTag {
                for (key, position) in keys where defaultTable.strings[key] == nil {
                    report(
                        position,
                        "'\(key)' is in locale '\(tables[tag]!.name)' but not in the default locale "
                            + "'\(defaultTable.name)'\(Spelling.suggestion(for: key, among: defaultTable.strings.keys)); "
                            + "every key needs a default string")
                }
            }
        }
        return Localization(defaultLocale: defaultTag, tables: tables)
    }

    mutating func flattenStrings(
        _ node: SourceNode, prefix: String, into strings: inout [String: Template],
        keys: inout [(String, SourcePosition)]
    ) {
        guard let entries = node.entries else {
            report(node.position, "a locale table maps keys to texts, e.g. chat.title: \"New message\"")
            return
        }
        for entry in entries {
            let key = prefix.isEmpty ? entry.key : prefix + "." + entry.key
            if entry.value.entries != nil {
                flattenStrings(entry.value, prefix: key, into: &strings, keys: &keys)
                continue
            }
            guard entry.value.scalarValue?.stringValue != nil else {
                report(
                    entry.value.position,
                    "locale string '\(key)' must be text, found \(entry.value.kindDescription)"
                        + (entry.value.quotingHint.map { "; \($0)" } ?? ""))
                continue
            }
            compilingLocaleString = true
            let template = compileTemplate(entry.value, field: key)
            compilingLocaleString = false
            if let template {
                strings[key] = template
                keys.append((key, entry.keyPosition))
            }
        }
    }

    func isLocaleTag(_ tag: String) -> Bool {
        let parts = tag.split(separator: "-", omittingEmptySubsequences: false).flatMap {
            $0.split(separator: "_", omittingEmptySubsequences: false)
        }
        guard let first = parts.first, (2...8).contains(first.count),
            first.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("A"..."Z").contains($0) })
        else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.count) && part.utf8.allSatisfy { isAlphanumeric($0) }
        }
    }

    mutating func checkTranslationUses(_ localization: Localization) {
        for use in translationUses {
            ruleID = use.ruleID
            guard let table = localization.tables[localization.defaultLocale] else {
                if localization.tables.isEmpty {
                    report(use.position, "'\(use.key)' | t needs locale tables; add a localization block")
                }
                continue
            }
            if table.strings[use.key] == nil {
                report(
                    use.position,
                    "'\(use.key)' | t: the key is not in the default locale '\(table.name)'"
                        + Spelling.suggestion(for: use.key, among: table.strings.keys))
            }
        }
        ruleID = nil
    }
}

@inline(__always) func isAlphanumeric(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
}

/// A field of a rule with where it came from: the rule itself or `defaults`.
struct FieldSource {
    let entry: SourceEntry
    let fromDefaults: Bool
    var node: SourceNode { entry.value }
}
