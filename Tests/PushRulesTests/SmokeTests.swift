import APNs
import Testing
@testable import PushRules

@Suite struct SmokeTests {
    @Test func sendsAnAlertForAMatchingEvent() throws {
        let rules = """
            version: 1
            rules:
              - id: chat
                match: {type: chat.message}
                alert:
                  title: "{{ event.data.sender.name }}"
                  body: "{{ event.data.text }}"
            """
        let lines = try Golden.lines(rules, Golden.event(data: #"{"sender": {"name": "Ana"}, "text": "hi"}"#))
        print(lines)
        #expect(lines.count == 1)
    }
}
