// An event pattern compiled for matching: its conditions, path names, tests and operands as trivial values in
// storage that the pattern owns (TrivialStorage), so that matching an event copies nothing. Matched through the
// pattern's own arrays, strings and enums, every condition's tests, every test's operand and every path name
// read were retained and released again: about 50 retains and releases per sent record, the event loops'
// largest cluster of them (docs/performance.md, 2026-12-07, tenth session).

import JSON

/// A pattern's conditions as trivial values, matching events as ``MatchCondition`` and ``ValueTest`` define
/// matching (they stay the pattern's readable form, for explanations and the rule index). A trivial value
/// itself, so that reading it out of a rule copies nothing; the storage it was compiled into must outlive it.
struct MatchingConditions: @unchecked Sendable {
    fileprivate let conditions: UnsafeBufferPointer<Condition>

    /// Compiles `conditions` into `storage`.
    init(compiling conditions: [MatchCondition], into storage: TrivialStorage) {
        self.conditions = Self.compile(conditions, into: storage)
    }

    /// Whether every condition holds for `event`.
    func matches(_ event: JSONNode) -> Bool { Self.allHold(conditions, event) }

    /// Whether condition number `index` (of the pattern's `conditions`) holds for `event`.
    func conditionHolds(_ index: Int, _ event: JSONNode) -> Bool { Self.holds(conditions[index], event) }

    private static func allHold(_ conditions: UnsafeBufferPointer<Condition>, _ event: JSONNode) -> Bool {
        for condition in conditions where !holds(condition, event) { return false }
        return true
    }

    private static func holds(_ condition: Condition, _ event: JSONNode) -> Bool {
        switch condition.test {
        case .anyOf(let alternatives):
            for alternative in alternatives where allHold(alternative, event) { return true }
            return false
        case .values(let checks):
            var found = false
            if anyValue(at: condition.path, from: 0, in: event, found: &found, where: checks) { return true }
            if !found {
                for check in checks { if case .exists(false) = check { return true } }
            }
            return false
        }
    }

    /// Walks `path` from `step`, descending into every element of any array on the way (and at the end), as
    /// EventBridge does; true when some value there passes one of `checks`.
    private static func anyValue(
        at path: UnsafeBufferPointer<UnsafeBufferPointer<UInt8>>, from step: Int, in value: JSONNode,
        found: inout Bool, where checks: UnsafeBufferPointer<Check>
    ) -> Bool {
        if value.isArray {
            for element in value.elements
            where anyValue(at: path, from: step, in: element, found: &found, where: checks) {
                return true
            }
            return false
        }
        if step < path.count {
            guard let next = value.member(named: path[step]) else { return false }
            return anyValue(at: path, from: step + 1, in: next, found: &found, where: checks)
        }
        found = true
        for check in checks where passes(check, value) { return true }
        return false
    }

    private static func passes(_ check: Check, _ value: JSONNode) -> Bool {
        switch check {
        case .equalsText(let text):
            return value.kind == .string && value.isText(utf8: text)
        case .equalsInt(let expected):
            switch value.kind {
            case .int: return expected == value.intValue
            case .double: return Double(expected) == value.doubleValue
            default: return false
            }
        case .equalsDouble(let expected):
            switch value.kind {
            case .int, .double: return expected == value.doubleValue
            default: return false
            }
        case .equalsBool(let expected):
            return value.kind == .bool && expected == value.boolValue
        case .equalsNull:
            return value.kind == .null
        case .never:
            return false
        case .prefix(let prefix):
            return value.withUTF8 { $0.starts(with: prefix) } ?? false
        case .suffix(let suffix):
            return value.withUTF8 { $0.reversed().starts(with: suffix.reversed()) } ?? false
        case .equalsIgnoreCase(let lowered):
            guard let string = value.stringValue else { return false }
            return string.lowercased() == String(decoding: lowered, as: UTF8.self)
        case .anythingBut(let checks):
            for check in checks where passes(check, value) { return false }
            return true
        case .numeric(let bounds):
            guard let number = value.doubleValue else { return false }
            for bound in bounds where !bound.admits(number) { return false }
            return true
        case .exists(let shouldExist):
            return shouldExist
        }
    }
}

extension MatchingConditions {
    // MARK: - The compiled forms

    /// `MatchCondition`, compiled.
    fileprivate struct Condition {
        enum Test {
            case values(UnsafeBufferPointer<Check>)
            case anyOf(UnsafeBufferPointer<UnsafeBufferPointer<Condition>>)
        }
        let path: UnsafeBufferPointer<UnsafeBufferPointer<UInt8>>
        let test: Test
    }

    /// `ValueTest`, compiled: text operands as their UTF-8 bytes.
    fileprivate enum Check {
        case equalsText(UnsafeBufferPointer<UInt8>)
        case equalsInt(Int64)
        case equalsDouble(Double)
        case equalsBool(Bool)
        case equalsNull
        /// `equals` with an array or an object, which no value passes.
        case never
        case prefix(UnsafeBufferPointer<UInt8>)
        case suffix(UnsafeBufferPointer<UInt8>)
        /// The operand is stored lowercased.
        case equalsIgnoreCase(UnsafeBufferPointer<UInt8>)
        case anythingBut(UnsafeBufferPointer<Check>)
        case numeric(UnsafeBufferPointer<NumericBound>)
        case exists(Bool)
    }

    // MARK: - Compiling

    private static func compile(_ conditions: [MatchCondition], into storage: TrivialStorage)
        -> UnsafeBufferPointer<Condition>
    {
        storage.copy(
            conditions.map { condition in
                let path = storage.copy(condition.path.map { storage.bytes($0) })
                switch condition.test {
                case .values(let tests):
                    return Condition(path: path, test: .values(checks(tests, into: storage)))
                case .anyOf(let alternatives):
                    return Condition(
                        path: path,
                        test: .anyOf(storage.copy(alternatives.map { compile($0.conditions, into: storage) })))
                }
            })
    }

    private static func checks(_ tests: [ValueTest], into storage: TrivialStorage) -> UnsafeBufferPointer<Check> {
        storage.copy(tests.map { check($0, into: storage) })
    }

    private static func check(_ test: ValueTest, into storage: TrivialStorage) -> Check {
        switch test {
        case .equals(let expected):
            switch expected {
            case .string(let text): return .equalsText(storage.bytes(text))
            case .int(let number): return .equalsInt(number)
            case .double(let number): return .equalsDouble(number)
            case .bool(let flag): return .equalsBool(flag)
            case .null: return .equalsNull
            case .array, .object: return .never
            }
        case .prefix(let prefix): return .prefix(storage.bytes(prefix))
        case .suffix(let suffix): return .suffix(storage.bytes(suffix))
        case .equalsIgnoreCase(let lowered): return .equalsIgnoreCase(storage.bytes(lowered))
        case .anythingBut(let tests): return .anythingBut(checks(tests, into: storage))
        case .numeric(let bounds): return .numeric(storage.copy(bounds))
        case .exists(let shouldExist): return .exists(shouldExist)
        }
    }
}
