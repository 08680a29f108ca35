// Golden tests of templates: every filter, strict missing values, typed single expressions, and
// output built as JSON values (event text can never break or inject into the payload).

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct TemplateTests {
    /// Renders `template` as `custom.out` against an event with `data`; the rendered value, or the
    /// rejection's problems.
    static func render(_ template: String, data: String = "{}", extra: String = "") throws -> JSONValue {
        let rules = """
            version: 1
            rules:
              - id: t
                match: {}
                alert: x
                custom:
                  out: \(template)
            """
        let decision = try Golden.decision(rules, Golden.event(data: data, extra: extra))
        if decision["status"] == "send" { return decision["body"]?["out"] ?? "<left out>" }
        return decision["problems"] ?? .null
    }

    static let sample =
        #"{"name": "ana", "count": 3, "ratio": 0.5, "on": true, "tags": ["a", "b", 3],"#
        + #" "nested": {"k": [1, {"x": null}]}, "spaced": "  hi  ", "nothing": null}"#

    @Test func interpolatesValuesIntoText() throws {
        #expect(
            try Self.render(#""Hi {{ event.data.name }}, {{ event.data.count }} new""#, data: Self.sample)
                == "Hi ana, 3 new")
        #expect(try Self.render(#""{{ event.data.ratio }}/{{ event.data.on }}""#, data: Self.sample) == "0.5/true")
        #expect(try Self.render(#""plain text""#) == "plain text")
    }

    @Test func aSingleExpressionKeepsItsType() throws {
        #expect(try Self.render(#""{{ event.data.count }}""#, data: Self.sample) == 3)
        #expect(try Self.render(#""{{event.data.on}}""#, data: Self.sample) == true)
        #expect(
            try Self.render(#""{{ event.data.nested }}""#, data: Self.sample)
                == ["k": [1, ["x": .null]]])
        #expect(try Self.render(#""{{ event.data.tags }}""#, data: Self.sample) == ["a", "b", 3])
    }

    @Test func readsArrayElementsAndQuotedKeys() throws {
        #expect(try Self.render(#""{{ event.data.tags[1] }}""#, data: Self.sample) == "b")
        #expect(try Self.render(#""{{ event.data.tags.0 }}""#, data: Self.sample) == "a")
        #expect(try Self.render(#""{{ event.data['odd key'] }}""#, data: #"{"odd key": 1}"#) == 1)
        #expect(try Self.render(#""{{ event.recipient.user_id }} {{ locale }}""#) == "u1 fr-CA")
        #expect(try Self.render(#""{{ device.environment }}""#) == "production")
    }

    @Test func aMissingValueIsAnErrorNamingWhatIsMissing() throws {
        #expect(
            try Self.render(#""{{ event.data.sender.name }}""#, data: #"{"sender": {}}"#)
                == [
                    .string(
                        "custom.out: event.data.sender.name is missing (event.data.sender has no 'name'); "
                            + "add | default(...) if it is optional")
                ])
        #expect(
            try Self.render(#""Hi {{ event.data.who }}""#)
                == [
                    .string(
                        "custom.out: event.data.who is missing (event.data has no 'who'); "
                            + "add | default(...) if it is optional")
                ])
        #expect(
            try Self.render(#""{{ event.data.nothing }}""#, data: Self.sample)
                == ["custom.out: event.data.nothing is null; add | default(...) if it is optional"])
        #expect(
            try Self.render(#""{{ event.data.tags[7] }}""#, data: Self.sample)
                == [
                    .string(
                        "custom.out: event.data.tags[7] is missing (event.data.tags has 3 elements); "
                            + "add | default(...) if it is optional")
                ])
    }

    @Test func defaultFillsMissingAndNullValues() throws {
        #expect(try Self.render(#""{{ event.data.who | default('someone') }}""#) == "someone")
        #expect(try Self.render(#""{{ event.data.nothing | default(0) }}""#, data: Self.sample) == 0)
        #expect(try Self.render(#""{{ event.data.name | default('x') }}""#, data: Self.sample) == "ana")
        #expect(try Self.render(#""{{ event.data.who | default(event.data.name) }}""#, data: Self.sample) == "ana")
        #expect(try Self.render(#""{{ event.data.who | upper | default('none') }}""#) == "none")
    }

    @Test func defaultNullLeavesTheFieldOut() throws {
        #expect(try Self.render(#""{{ event.data.who | default(null) }}""#) == "<left out>")
        let rules = """
            version: 1
            rules:
              - id: t
                match: {}
                alert:
                  title: "{{ event.data.title | default(null) }}"
                  body: "{{ event.data.text }}"
            """
        #expect(try Golden.body(rules, Golden.event(data: #"{"text": "hi"}"#)) == #"{"aps":{"alert":{"body":"hi"}}}"#)
    }

    @Test func upperAndLower() throws {
        #expect(try Self.render(#""{{ event.data.name | upper }}""#, data: Self.sample) == "ANA")
        #expect(try Self.render(#""{{ 'ÉCOLE' | lower }}""#) == "école")
        #expect(try Self.render(#""{{ event.data.count | upper }}""#, data: Self.sample) == "3")
    }

    @Test func truncateCountsCharactersNotBytes() throws {
        #expect(try Self.render(#""{{ 'hello world' | truncate(8) }}""#) == "hello w…")
        #expect(try Self.render(#""{{ 'short' | truncate(8) }}""#) == "short")
        #expect(try Self.render(#""{{ 'exactly8' | truncate(8) }}""#) == "exactly8")
        // Trailing spaces are dropped before the ellipsis.
        #expect(try Self.render(#""{{ 'hello world' | truncate(7) }}""#) == "hello…")
        // Multibyte characters and emoji (one character each, however many bytes) are never split.
        #expect(try Self.render(#""{{ '日本語のテキスト' | truncate(4) }}""#) == "日本語…")
        #expect(try Self.render(#""{{ '👨‍👩‍👧‍👦👍🏽abc' | truncate(3) }}""#) == "👨‍👩‍👧‍👦👍🏽…")
    }

    @Test func joinJoinsTextsAndNumbers() throws {
        #expect(try Self.render(#""{{ event.data.tags | join }}""#, data: Self.sample) == "a, b, 3")
        #expect(try Self.render(#""{{ event.data.tags | join(' · ') }}""#, data: Self.sample) == "a · b · 3")
        #expect(
            try Self.render(#""{{ event.data.name | join }}""#, data: Self.sample)
                == ["custom.out: {{ event.data.name | join }}: join needs a list, found a string"])
        #expect(
            try Self.render(#""{{ event.data.nested.k | join }}""#, data: Self.sample)
                == [
                    .string(
                        "custom.out: {{ event.data.nested.k | join }}: join needs a list of texts or numbers, "
                            + "element 1 is an object")
                ])
    }

    @Test func jsonEmbedsAValueAsText() throws {
        #expect(
            try Self.render(#""{{ event.data.nested | json }}""#, data: Self.sample)
                == #"{"k":[1,{"x":null}]}"#)
        #expect(try Self.render(#""n={{ event.data.tags | json }}""#, data: Self.sample) == #"n=["a","b",3]"#)
    }

    @Test func trimAndLength() throws {
        #expect(try Self.render(#""[{{ event.data.spaced | trim }}]""#, data: Self.sample) == "[hi]")
        #expect(try Self.render(#""{{ event.data.tags | length }}""#, data: Self.sample) == 3)
        #expect(try Self.render(#""{{ 'héllo' | length }}""#) == 5)
    }

    @Test func filtersChainLeftToRight() throws {
        #expect(try Self.render(#""{{ event.data.spaced | trim | upper }}""#, data: Self.sample) == "HI")
        #expect(try Self.render(#""{{ event.data.name | upper | truncate(2) }}""#, data: Self.sample) == "A…")
    }

    @Test func listsAndObjectsCannotBePastedIntoText() throws {
        #expect(
            try Self.render(#""tags: {{ event.data.tags }}""#, data: Self.sample)
                == ["custom.out: {{ event.data.tags }} is a list inside text; use | join(', ') or | json"])
        #expect(
            try Self.render(#""n: {{ event.data.nested }}""#, data: Self.sample)
                == ["custom.out: {{ event.data.nested }} is an object inside text; pick a field or use | json"])
    }

    @Test func eventTextCannotBreakOrInjectIntoThePayload() throws {
        let hostile = #"{"text": "\"},\"aps\":{\"badge\":99},\"x\":{\"a\":\"\n\t\u0001{{ event.id }}\\"}"#
        let rules = """
            version: 1
            rules:
              - id: t
                match: {}
                alert:
                  body: "{{ event.data.text }}"
            """
        let body = try Golden.body(rules, Golden.event(data: hostile))
        #expect(
            body == #"{"aps":{"alert":{"body":"\"},\"aps\":{\"badge\":99},\"x\":{\"a\":\"\n\t\u0001"#
                + #"{{ event.id }}\\"}}}"#)
        let parsed = try JSONValue(parsing: body)
        #expect(parsed["aps"]?["badge"] == nil)
        #expect(
            parsed["aps"]?["alert"]?["body"]
                == "\"},\"aps\":{\"badge\":99},\"x\":{\"a\":\"\n\t\u{01}{{ event.id }}\\")
    }

    @Test func literalBracesCanBeWrittenAsAText() throws {
        #expect(try Self.render(#""{{ '{{' }} not a template }}""#) == "{{ not a template }}")
        #expect(try Self.render(#""a }} b""#) == "a }} b")
    }
}
