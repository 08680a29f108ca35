// Golden tests of load errors: every kind of mistake is reported, all at once, with file:line:column,
// the rule it is in, and what would be right.

import APNs
import Testing

@testable import PushRules

@Suite struct LoadErrorTests {
    /// The problems of a file made of `rules` after a valid header.
    static func problems(_ rules: String) -> [String] {
        Golden.problems("version: 1\nrules:\n" + rules)
    }

    @Test func unknownKeysSuggestTheClosestRightOne() {
        #expect(
            Golden.problems(
                """
                version: 1
                defaults:
                  prority: 10
                rulez: []
                rules:
                  - id: a
                    match: {type: x}
                    thred_id: t
                    alert: {titel: T}
                    sound: {nme: x, name: y}
                    live_activty: {}
                """) == [
                    "rules.yaml:3:3: unknown key 'prority' in defaults; did you mean 'priority'?",
                    "rules.yaml:4:1: unknown key 'rulez' in the rules file; did you mean 'rules'?",
                    "rules.yaml:8:5: rule 'a': unknown key 'thred_id' in a rule; did you mean 'thread_id'?",
                    "rules.yaml:9:13: rule 'a': unknown key 'titel' in alert; did you mean 'title'?",
                    "rules.yaml:10:13: rule 'a': unknown key 'nme' in sound; did you mean 'name'?",
                    "rules.yaml:11:5: rule 'a': unknown key 'live_activty' in a rule; did you mean 'live_activity'?",
                ])
    }

    @Test func applesKeyNamesSuggestTheRulesFileSpelling() {
        #expect(
            Self.problems(
                """
                  - id: a
                    match: {}
                    alert: x
                    thread-id: t
                    mutable-content: true
                """) == [
                    "rules.yaml:6:5: rule 'a': unknown key 'thread-id' in a rule; did you mean 'thread_id'?",
                    "rules.yaml:7:5: rule 'a': unknown key 'mutable-content' in a rule; did you mean 'mutable_content'?",
                ])
    }

    @Test func badOperators() {
        #expect(
            Self.problems(
                """
                  - id: a
                    match:
                      type: {prefx: chat.}
                      data:
                        count: {numeric: [">>", 1]}
                        size: {numeric: [">", "big"]}
                        kind: {anything-but: {wildcard: x}}
                        other: [{wildcard: "a*"}]
                        both: {prefix: a, suffix: b}
                        none: []
                        flag: {exists: maybe}
                      $and: []
                    alert: x
                """) == [
                    "rules.yaml:5:14: rule 'a': type: unknown operator 'prefx'; did you mean 'prefix'? "
                        + "(to match an event field named 'prefx', write its values as a list)",
                    "rules.yaml:7:27: rule 'a': data.count: '>>' is not a comparison; use one of = < <= > >=",
                    "rules.yaml:8:31: rule 'a': data.size: > needs a number, found 'big'",
                    "rules.yaml:9:30: rule 'a': data.kind: anything-but takes a value, a list of values, or one of "
                        + "{prefix: ...}, {suffix: ...}, {equals-ignore-case: ...}",
                    "rules.yaml:10:18: rule 'a': data.other: unknown operator 'wildcard'; operators: prefix, suffix, "
                        + "equals-ignore-case, anything-but, numeric, exists",
                    "rules.yaml:11:15: rule 'a': data.both: an operator object has exactly one key, one of prefix, suffix, "
                        + "equals-ignore-case, anything-but, numeric, exists; to combine, list them: "
                        + "[{prefix: a}, {suffix: b}]",
                    "rules.yaml:12:15: rule 'a': data.none: an empty list matches nothing; list the values to match",
                    "rules.yaml:13:24: rule 'a': data.flag: exists takes true or false",
                    "rules.yaml:14:7: rule 'a': unknown '$and' in a pattern; the only $ key is $or",
                ])
    }

    @Test func yamlBooleansThatWereMeantAsTextAreCaught() {
        #expect(
            Self.problems(
                """
                  - id: a
                    match: {data: {country: NO}}
                    alert: x
                    category: yes
                    sound: off
                """) == [
                    "rules.yaml:4:29: rule 'a': data.country: NO is read as the boolean false in YAML 1.1; write false for "
                        + "the boolean, or \"NO\" in quotes for the text",
                    "rules.yaml:6:15: rule 'a': category: yes is read as the boolean true in YAML 1.1; write it in quotes "
                        + "(\"yes\") if you mean the text",
                    "rules.yaml:7:12: rule 'a': sound: off is read as the boolean false in YAML 1.1; write it in quotes "
                        + "(\"off\") if you mean the text",
                ])
    }

    @Test func templateErrorsPointAtTheColumn() {
        #expect(
            Self.problems(
                """
                  - id: a
                    match: {}
                    alert:
                      title: "{{ event.data.name | uper }}"
                      subtitle: '{{ evnt.data.x }}'
                      body: Hi {{ event.data.name
                    custom:
                      a: "{{ }}"
                      b: "{{ event.x | truncate(0) }}"
                      c: "{{ event.x | default }}"
                      d: "{{ event.x | join(1) }}"
                      e: "{{ event.x | upper(2) }}"
                      f: "{{ event.x y }}"
                      g: "{{ locale.x }}"
                      h: "{{ 'unterminated }}"
                      i: |
                        line one {{ event.x | nope }}
                """) == [
                    "rules.yaml:6:36: rule 'a': alert.title: template error: unknown filter 'uper' (did you mean 'upper'?); "
                        + "filters: default, join, json, length, lower, t, trim, truncate, upper",
                    "rules.yaml:7:21: rule 'a': alert.subtitle: template error: unknown variable 'evnt' (did you mean "
                        + "'event'?); templates can read event, device and locale",
                    "rules.yaml:8:16: rule 'a': alert.body: template error: '{{' is never closed; add '}}'",
                    "rules.yaml:10:11: rule 'a': custom.a: template error: empty {{ }}; put a value inside, "
                        + "e.g. {{ event.id }}",
                    "rules.yaml:11:24: rule 'a': custom.b: template error: truncate needs a length from 1 up, "
                        + "e.g. truncate(40)",
                    "rules.yaml:12:24: rule 'a': custom.c: template error: filter default is written default(value)",
                    "rules.yaml:13:24: rule 'a': custom.d: template error: join takes a quoted separator, e.g. join(', ')",
                    "rules.yaml:14:24: rule 'a': custom.e: template error: filter upper takes no arguments",
                    "rules.yaml:15:22: rule 'a': custom.f: template error: unexpected 'y' in {{ }}; expected '|' and a "
                        + "filter, or '}}'",
                    "rules.yaml:16:14: rule 'a': custom.g: template error: locale is a text (such as fr-CA) and has no fields",
                    "rules.yaml:17:14: rule 'a': custom.h: template error: unterminated text literal; close it with '",
                    "rules.yaml:18:10: rule 'a': custom.i: template error: unknown filter 'nope'; filters: default, join, "
                        + "json, length, lower, t, trim, truncate, upper (at character 23 of the text)",
                ])
    }

    @Test func pushTypePriorityAndTopicCombinationsAppleRejects() {
        #expect(
            Self.problems(
                """
                  - id: silent
                    match: {type: a}
                    push_type: background
                    priority: 10
                    alert: x
                    badge: 1
                  - id: call
                    match: {type: b}
                    push_type: pushtotalk
                    priority: 5
                  - id: files
                    match: {type: c}
                    push_type: fileprovider
                    priority: 1
                  - id: mdm
                    match: {type: d}
                    push_type: mdm
                  - id: topic
                    match: {type: e}
                    push_type: voip
                    topic: com.example.app
                  - id: la
                    match: {type: f}
                    push_type: alert
                    live_activity: {event: end}
                  - id: type
                    match: {type: g}
                    push_type: alret
                  - id: prio
                    match: {type: h}
                    alert: x
                    priority: 7
                """) == [
                    "rules.yaml:6:15: rule 'silent': priority 10 is not allowed for background pushes (APNs rejects it "
                        + "with BadPriority); use 5",
                    "rules.yaml:7:5: rule 'silent': background pushes carry only content-available in aps (APNs rejects "
                        + "alert, badge and sound there); remove 'alert', use push_type: alert, or put app data under custom",
                    "rules.yaml:8:5: rule 'silent': background pushes carry only content-available in aps (APNs rejects "
                        + "alert, badge and sound there); remove 'badge', use push_type: alert, or put app data under custom",
                    "rules.yaml:12:15: rule 'call': priority 5 is not allowed for pushtotalk pushes (APNs rejects it "
                        + "with BadPriority); use 10",
                    "rules.yaml:17:5: rule 'mdm': mdm pushes need 'topic': the push magic topic from the MDM certificate "
                        + "(com.apple.mgmt.External.<uuid>)",
                    "rules.yaml:23:12: rule 'topic': topic: voip pushes go to the topic <bundle id>.voip; 'com.example.app' "
                        + "lacks the suffix, use 'com.example.app.voip'",
                    "rules.yaml:27:5: rule 'la': live_activity needs push_type: liveactivity",
                    "rules.yaml:30:16: rule 'type': push_type 'alret' is not an APNs push type (did you mean 'alert'?); use "
                        + "one of alert, background, voip, complication, fileprovider, mdm, location, liveactivity, "
                        + "pushtotalk, widgets, controls",
                    "rules.yaml:34:15: rule 'prio': 7 is not an APNs priority; use 10 (immediately), 5 (consider device "
                        + "power) or 1 (lowest)",
                ])
    }

    @Test func aDefaultThatDoesNotFitAPushTypeIsNotApplied() throws {
        let rules = """
            version: 1
            defaults: {priority: 10, sound: default, badge: 1}
            rules:
              - id: silent
                match: {}
                push_type: background
            """
        let decision = try Golden.decision(rules, Golden.event())
        #expect(decision["headers"]?["apns-priority"] == "5")
        #expect(decision["body"]?.compactString == #"{"aps":{"content-available":1}}"#)
    }

    @Test func fieldValuesAreCheckedAtLoad() {
        #expect(
            Self.problems(
                """
                  - id: a
                    match: {}
                    alert: x
                    ttl: 1hour
                    badge: -1
                    interruption_level: loud
                    relevance_score: 2
                    collapse_id: 01234567890123456789012345678901234567890123456789012345678901234567890
                    app: com.example/app
                    accept_overrides: [priority, colour]
                    shorten: alert.bdy
                    mutable_content: 1
                    custom: {aps: {}}
                """) == [
                    "rules.yaml:6:10: rule 'a': '1hour' is not a duration; ttl is seconds or a duration such as 90s, 15m, "
                        + "1h, 2d or 1h30m (0: try once, do not store)",
                    "rules.yaml:7:12: rule 'a': badge must be at least 0, but found -1",
                    "rules.yaml:8:25: rule 'a': interruption_level must be one of passive, active, time-sensitive, critical, "
                        + "but found \"loud\"",
                    "rules.yaml:9:22: rule 'a': relevance_score must be a number from 0 to 1, but found 2",
                    "rules.yaml:10:18: rule 'a': collapse_id: the collapse id is 71 bytes of UTF-8; APNs accepts at most 64 "
                        + "(7 over; non-ASCII characters take 2 to 4 bytes each)",
                    "rules.yaml:11:10: rule 'a': app: '/' at position 12 of topic 'com.example/app' cannot be in a bundle id; "
                        + "use letters, digits, '-' and '.' such as com.example.app",
                    "rules.yaml:12:34: rule 'a': 'colour' cannot be overridden; overridable: priority, expiration, "
                        + "collapse_id, thread_id, badge, sound, category, interruption_level, relevance_score",
                    "rules.yaml:13:14: rule 'a': shorten: 'alert.bdy' is not a text field this rule sets; name one such as "
                        + "alert.body, alert.title or custom.<key>",
                    "rules.yaml:14:22: rule 'a': mutable_content must be true or false, found a number 1",
                    "rules.yaml:15:14: rule 'a': custom cannot set 'aps'; use the rule's fields (alert, badge, sound, ...)",
                ])
    }

    @Test func ruleStructureProblems() {
        #expect(
            Golden.problems(
                """
                version: 2
                rules:
                  - match: {type: q}
                    alert: x
                  - id: a
                    alert: x
                  - id: a
                    match: {type: z}
                    alert: x
                  - id: bad id!
                    match: {type: y}
                    alert: x
                  - id: skipper
                    match: {type: w}
                    skip: muted
                    alert: x
                  - just a string
                """) == [
                    "rules.yaml:1:10: version is a number 2; this apns-worker reads version: 1",
                    "rules.yaml:3:5: a rule needs an 'id' (letters, digits, '.', '_', '-'), e.g. id: chat-message",
                    "rules.yaml:5:5: rule 'a': a rule needs 'match'; use match: {} to match every event",
                    "rules.yaml:7:9: rule 'a': duplicate rule id 'a' (first at line 5); ids must be unique",
                    "rules.yaml:10:9: rule 'bad id!': id 'bad id!' must be 1 to 64 letters, digits, '.', '_' or '-', "
                        + "starting with a letter or digit",
                    "rules.yaml:16:5: rule 'skipper': a rule with 'skip' sends nothing, so 'alert' has no effect; remove it",
                    "rules.yaml:17:5: a rule must be a mapping, found a string; e.g. - id: chat-message\n"
                        + "  match: {type: chat.message}",
                ])
    }

    @Test func aRuleAfterACatchAllCanNeverMatch() {
        #expect(
            Self.problems(
                """
                  - id: all
                    match: {}
                    alert: x
                  - id: never
                    match: {type: t}
                    alert: y
                """) == [
                    "rules.yaml:6:5: rule 'never': this rule can never match: rule 'all' (line 3) matches every event and "
                        + "does not continue"
                ])
    }

    @Test func localizationProblems() {
        #expect(
            Golden.problems(
                """
                version: 1
                localization:
                  default_locale: en
                  tables:
                    en:
                      hello: "Hi"
                      loop: "{{ 'hello' | t }}"
                    fr:
                      helo: Salut
                    e:
                      hello: Hi
                    fr_FR: {hello: Salut}
                    fr-fr: {hello: Salut}
                rules:
                  - id: a
                    match: {}
                    alert: "{{ 'helo' | t }}"
                """) == [
                    "rules.yaml:7:13: loop: a locale string cannot use | t itself",
                    "rules.yaml:9:7: 'helo' is in locale 'fr' but not in the default locale 'en' (did you mean 'hello'?); "
                        + "every key needs a default string",
                    "rules.yaml:10:5: 'e' is not a locale tag; use a BCP 47 tag such as en, fr, fr-CA",
                    "rules.yaml:13:5: locale 'fr-fr' repeats the one at line 12",
                    "rules.yaml:17:16: rule 'a': 'helo' | t: the key is not in the default locale 'en' (did you mean 'hello'?)",
                ])
        #expect(
            Golden.problems(
                """
                version: 1
                rules:
                  - id: a
                    match: {}
                    alert: "{{ 'hello' | t }}"
                """) == ["rules.yaml:5:16: rule 'a': 'hello' | t needs locale tables; add a localization block"])
    }

    @Test func yamlSyntaxErrorsHaveTheirPosition() {
        #expect(
            Golden.problems("version: 1\nrules:\n  - id: a\n    match: {type: [a, b}\n")
                == [
                    "rules.yaml:4:24: did not find expected ',' or ']' "
                        + "(while parsing a flow sequence that began at line 4)"
                ])
        #expect(
            Golden.problems("version: 1\nversion: 1\n") == [
                "rules.yaml:2:1: duplicate key 'version' (first at line 1)"
            ])
        #expect(Golden.problems("") == ["rules.yaml:1:1: the file is empty; a rules file starts with 'version: 1'"])
        #expect(
            Golden.problems("version: 1\n---\nversion: 1\n") == [
                "rules.yaml:2:1: a rules file holds one YAML document; remove the second '---'"
            ])
        #expect(Golden.problems("a: &x 1\nb: *y\n") == ["rules.yaml:2:4: unknown alias *y; define &y before using it"])
        #expect(
            Golden.problems("base: &b {x: 1}\nother:\n  <<: *b\n") == [
                "rules.yaml:3:3: merge keys (<<) are not supported; put shared fields under 'defaults'"
            ])
    }

    @Test func jsonRulesFilesReportJSONErrorsAndRuleProblemsWithPositions() {
        #expect(
            Golden.problems("{\"version\": 1,\n \"rules\": [,]}", file: "rules.json")
                == ["rules.json:2:12: not valid JSON: unexpected ',', expected a value"])
        #expect(
            Golden.problems(
                """
                {"version": 1,
                 "rules": [{"id": "a", "match": {}, "alert": "x", "badge": "{{ event.data.n | nope }}"}]}
                """, file: "rules.json") == [
                    "rules.json:2:79: rule 'a': badge: template error: unknown filter 'nope'; filters: default, join, json, "
                        + "length, lower, t, trim, truncate, upper"
                ])
    }

    @Test func theFileMustExist() {
        #expect(throws: RulesLoadError.self) { try RuleSet.load(contentsOf: "/nonexistent/rules.yaml") }
        do {
            _ = try RuleSet.load(contentsOf: "/nonexistent/rules.yaml")
        } catch {
            #expect(
                error.description == "/nonexistent/rules.yaml:1:1: the rules file does not exist\n"
                    + "1 problem in /nonexistent/rules.yaml")
        }
    }
}
