// The smallest worker configuration around a given `kafka` section, for the tests of its keys.

import JSON

@testable import Worker

enum KafkaSectionConfiguration {
    /// One token credential and one app, and `kafka` as given (brokers default to one).
    static func decode(kafka settings: JSONObject) throws -> WorkerConfiguration {
        var kafka: JSONObject = ["brokers": ["k1:9092"]]
        for member in settings { kafka[member.key] = member.value }
        let document: JSONValue = [
            "kafka": .object(kafka),
            "credentials": [
                "team-key": [
                    "type": "token", "key_file": "/s/AuthKey.p8", "key_id": "ABC123DEFG", "team_id": "DEF123GHIJ",
                ]
            ],
            "apps": ["com.example.chat": ["credential": "team-key"]],
        ]
        return try WorkerConfiguration(decoding: document)
    }
}
