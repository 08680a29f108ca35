// Fitting the payload under APNs' size limit: the named field is shortened on a character boundary
// with an ellipsis; escapes and multibyte characters are counted as sent; when nothing helps, the
// push is rejected with PayloadTooLarge and nothing is sent.

import APNs
import JSON
import Testing

@testable import PushRules

@Suite struct PayloadFittingTests {
    static func rules(shorten: String? = nil, pushType: String = "alert", extra: String = "") -> String {
        """
        version: 1
        rules:
          - id: r
            match: {}
            push_type: \(pushType)
            alert:
              title: "{{ event.data.title | default('T') }}"
              body: "{{ event.data.text }}"
            custom:
              preview: "{{ event.data.preview | default('') }}"
        \(shorten.map { "    shorten: \($0)" } ?? "")
        \(extra)
        """
    }

    static func event(text: String, title: String = "T", preview: String = "") -> String {
        let data: JSONValue = ["text": .string(text), "title": .string(title), "preview": .string(preview)]
        return Golden.event(data: data.compactString)
    }

    /// The decision for `text`, checking every sent payload is within the limit and valid JSON.
    static func decide(_ rules: String, _ event: String) throws -> (JSONValue, PushDecision) {
        let ruleSet = try Golden.load(rules)
        let decision = ruleSet.evaluate(try JSONValue(parsing: event), now: Golden.now).decisions[0]
        if case .send(let push) = decision {
            let bytes = push.request.payload.compactBytes
            #expect(bytes.count <= push.request.pushType.payloadLimit)
            #expect(String(validating: bytes, as: UTF8.self) != nil)
            #expect(try JSONValue(parsing: bytes) == push.request.payload)
        }
        return (decision.json(includingAPNsID: false), decision)
    }

    @Test func aPayloadThatFitsIsLeftAlone() throws {
        let text = String(repeating: "a", count: 4000)
        let (decision, _) = try Self.decide(Self.rules(), Self.event(text: text))
        #expect(decision["body"]?["aps"]?["alert"]?["body"]?.stringValue == text)
        #expect(decision["notes"] == nil)
    }

    @Test func theBodyIsShortenedToExactlyTheLimitWithAnEllipsis() throws {
        let text = String(repeating: "a", count: 5000)
        let (decision, push) = try Self.decide(Self.rules(), Self.event(text: text))
        guard case .send(let sent) = push else {
            Issue.record("not sent: \(decision.compactString)")
            return
        }
        #expect(sent.request.payload.compactByteCount == 4096)
        let body = decision["body"]?["aps"]?["alert"]?["body"]?.stringValue ?? ""
        #expect(body.hasSuffix("a…"))
        #expect(body.utf8.count == 4096 - #"{"aps":{"alert":{"title":"T","body":""}},"preview":""}"#.utf8.count)
        #expect(
            decision["notes"] == [
                "alert.body shortened from 5000 to 4042 bytes to fit the 4096-byte payload limit"
            ])
    }

    @Test func multibyteTextIsCutOnACharacterBoundary() throws {
        // 3-byte CJK characters, 4-byte emoji, and a family emoji of 25 bytes that must not be split.
        for unit in ["日", "😀", "👨‍👩‍👧‍👦", "é", "a\u{301}"] {
            let text = String(repeating: unit, count: 6000 / unit.utf8.count + 1)
            let (decision, _) = try Self.decide(Self.rules(), Self.event(text: text))
            let body = decision["body"]?["aps"]?["alert"]?["body"]?.stringValue ?? ""
            #expect(body.hasSuffix(unit + "…"), "unit \(unit)")
            #expect(body.dropLast().allSatisfy { String($0) == unit }, "unit \(unit)")
            // No room for one more unit: the cut is as late as it could be.
            let size = try JSONValue(parsing: decision["body"]!.compactString).compactByteCount
            #expect(size > 4096 - unit.utf8.count, "unit \(unit): \(size)")
        }
    }

    @Test func escapedCharactersAreCountedAsSent() throws {
        // A quote, a backslash and a backspace take two bytes each in JSON, another control character six.
        for unit in ["\"", "\u{8}", "\u{1}", "\\"] {
            let text = String(repeating: unit, count: 5000)
            let (decision, push) = try Self.decide(Self.rules(), Self.event(text: text))
            guard case .send(let sent) = push else {
                Issue.record("not sent: \(decision.compactString)")
                return
            }
            let size = sent.request.payload.compactByteCount
            let perUnit = unit == "\u{1}" ? 6 : 2
            #expect(size <= 4096 && size > 4096 - perUnit, "unit \(unit.debugDescription): \(size)")
        }
    }

    @Test func trailingSpaceBeforeTheEllipsisIsDropped() throws {
        let text = String(repeating: "word ", count: 2000)
        let (decision, _) = try Self.decide(Self.rules(), Self.event(text: text))
        let body = decision["body"]?["aps"]?["alert"]?["body"]?.stringValue ?? ""
        #expect(body.hasSuffix("word…"))
    }

    @Test func theFieldsNamedInShortenAreTriedInOrder() throws {
        let preview = String(repeating: "p", count: 3000)
        let text = String(repeating: "b", count: 3000)
        let rules = Self.rules(shorten: "[custom.preview, alert.body]")
        let (decision, _) = try Self.decide(rules, Self.event(text: text, preview: preview))
        #expect(decision["body"]?["aps"]?["alert"]?["body"]?.stringValue == text)
        #expect(decision["body"]?["preview"]?.stringValue?.hasSuffix("p…") == true)
        // When the first is not enough, the second is shortened too.
        let (both, _) = try Self.decide(rules, Self.event(text: String(repeating: "b", count: 6000), preview: preview))
        #expect(both["body"]?["preview"] == "…")
        #expect(both["body"]?["aps"]?["alert"]?["body"]?.stringValue?.hasSuffix("b…") == true)
        #expect(both["notes"]?.arrayValue?.count == 2)
    }

    @Test func whenShorteningCannotHelpThePushIsRejectedAsPayloadTooLarge() throws {
        // The title is not named in shorten, so a huge title cannot be fitted.
        let title = String(repeating: "t", count: 5000)
        let (decision, _) = try Self.decide(Self.rules(), Self.event(text: "hi", title: title))
        #expect(decision["status"] == "rejected")
        #expect(decision["reason"] == "PayloadTooLarge")
        #expect(
            decision["problems"] == [
                .string(
                    "the payload is 5055 bytes, over the 4096-byte limit for alert pushes; shortening alert.body "
                        + "cannot make it fit")
            ])
    }

    @Test func voipPushesHaveTheLargerLimit() throws {
        let rules = """
            version: 1
            rules:
              - id: call
                match: {}
                push_type: voip
                custom: {blob: "{{ event.data.text }}"}
            """
        let fits = try Golden.decision(rules, Self.event(text: String(repeating: "v", count: 5000)))
        #expect(fits["status"] == "send")
        let tooBigEvent = Self.event(text: String(repeating: "v", count: 5200))
        let outcome = try Golden.load(rules).evaluate(try JSONValue(parsing: tooBigEvent), now: Golden.now)
        guard case .reject(let rejection) = outcome.decisions[0] else {
            Issue.record("not rejected")
            return
        }
        #expect(rejection.pushType == .voip)
        #expect(rejection.ruleID == "call")
        #expect(rejection.device?.token == Golden.token)
        let tooBig = try Golden.decision(rules, tooBigEvent)
        #expect(tooBig["reason"] == "PayloadTooLarge")
        #expect(
            tooBig["problems"] == [
                .string(
                    "the payload is 5211 bytes, over the 5120-byte limit for voip pushes; the rule names no field "
                        + "to shorten (shorten:)")
            ])
    }

    @Test func prefixArithmeticMatchesTheWriter() {
        for text in ["", "abc", "a\"b", "日本", "tab\there", "👍🏽x", "\u{7}"] {
            let quoted = JSONValue.string(text).compactByteCount
            #expect(PayloadFitting.escapedByteCount(text) == quoted - 2, "\(text.debugDescription)")
            for budget in 0...12 {
                let prefix = PayloadFitting.prefix(of: text, escapedByteBudget: budget)
                #expect(PayloadFitting.escapedByteCount(prefix) <= budget)
                #expect(text.hasPrefix(prefix))
            }
        }
    }

}
