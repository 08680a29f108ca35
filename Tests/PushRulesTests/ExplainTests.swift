// `explain`: for each rule, whether it matched and, condition by condition, what the event had.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct ExplainTests {
    static let rules = """
        version: 1
        rules:
          - id: mention
            match:
              type: chat.message
              data: {mentions: {exists: true}, count: {numeric: [">", 2]}}
            alert: m
          - id: either
            match:
              $or:
                - type: call.missed
                - data: {tags: [urgent, vip]}
            alert: e
          - id: chat
            match: {type: [{prefix: "chat."}]}
            alert: c
          - id: later
            match: {type: chat.message}
            alert: l
        """

    @Test func eachConditionSaysWhatWasExpectedAndWhatTheEventHad() throws {
        let event = try JSONValue(parsing: Golden.event(data: #"{"count": 1, "tags": ["a", "b"]}"#))
        let explanations = try Golden.load(Self.rules).explain(event)
        #expect(explanations.map(\.ruleID) == ["mention", "either", "chat", "later"])
        #expect(explanations.map(\.matched) == [false, false, true, true])
        #expect(explanations.map(\.reached) == [true, true, true, false])

        let mention = explanations[0].conditions
        #expect(mention.map(\.path) == ["type", "data.mentions", "data.count"])
        #expect(mention.map(\.matched) == [true, false, false])
        #expect(mention.map(\.expectation) == [#"is "chat.message""#, "exists", "is a number > 2"])
        #expect(mention.map(\.actual) == [#""chat.message""#, "missing", "1"])
        #expect(mention.map(\.position.line) == [5, 6, 6])

        let either = explanations[1].conditions
        #expect(either.count == 1)
        #expect(either[0].expectation == "matches one of 2 $or patterns")
        #expect(either[0].alternatives.map { $0.map(\.actual) } == [[#""chat.message""#], [#""a", "b""#]])
        #expect(either[0].alternatives[1][0].expectation == #"is "urgent" or is "vip""#)
    }

    @Test func manyValuesAreSummarised() throws {
        let event = try JSONValue(parsing: Golden.event(data: #"{"tags": [1, 2, 3, 4, 5, 6, 7]}"#))
        let explanations = try Golden.load(Self.rules).explain(event)
        #expect(explanations[1].conditions[0].alternatives[1][0].actual == "1, 2, 3, 4, 5, … (7 values)")
    }
}
