// The librdkafka properties every client shares, any extra property passed straight through, and
// the rule for which property values are secret (never echoed in errors).

/// Connection settings shared by ``KafkaConsumer``, ``KafkaProducer`` and the offset reader, plus a
/// pass-through map for any other librdkafka property.
///
/// Any property from librdkafka's CONFIGURATION.md can go into ``properties`` (`security.protocol`,
/// `sasl.mechanisms`, `sasl.username`, `sasl.password`, `ssl.ca.location`, ...). Properties there
/// override the typed settings and the client's defaults. Each rejected property is reported by name
/// with librdkafka's reason; values of secret-looking properties (see ``isSecret(_:)``) never appear
/// in an error.
public struct KafkaConfiguration: Sendable {
    /// Comma-separated `host:port` list of brokers to bootstrap from (`bootstrap.servers`). Required.
    public var bootstrapServers: String
    /// The client id sent to brokers and used in librdkafka's logs (`client.id`). Default: `apns-worker`.
    public var clientID: String = "apns-worker"
    /// Further librdkafka properties by name, passed through unchanged; they win over typed settings.
    public var properties: [String: String] = [:]

    public init(bootstrapServers: String, clientID: String = "apns-worker", properties: [String: String] = [:]) {
        self.bootstrapServers = bootstrapServers
        self.clientID = clientID
        self.properties = properties
    }

    /// Reads or sets one pass-through librdkafka property.
    public subscript(property name: String) -> String? {
        get { properties[name] }
        set { properties[name] = newValue }
    }

    /// Whether a property's value must never be shown: passwords, secrets, private keys, tokens,
    /// SASL credentials and JAAS strings (which embed passwords when ported from Java clients).
    public static func isSecret(_ name: String) -> Bool {
        let lowered = name.lowercased()
        let markers = [
            "password", "secret", "token", "credential", "jaas", "ssl.key", "ssl_key", ".pem",
            "sasl.username", "sasl.oauthbearer.config", "private",
        ]
        return markers.contains { lowered.contains($0) }
    }

    /// The shared properties in the order they are applied; `extra` (the client's own defaults and
    /// typed settings) goes between these and the pass-through map so the map wins.
    func librdkafkaProperties(with extra: [(String, String)]) -> [(String, String)] {
        var result: [(String, String)] = [("bootstrap.servers", bootstrapServers), ("client.id", clientID)]
        result += extra
        result += properties.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return result
    }
}

/// Replaces the values of secret properties wherever they appear in text from librdkafka.
///
/// librdkafka sometimes quotes only part of a value (for example the unrecognised rest of
/// `sasl.oauthbearer.config`), so compound values are also redacted piece by piece.
struct SecretRedactor: Sendable {
    private let secrets: [String]

    init(properties: [(String, String)]) {
        var secrets: Set<String> = []
        for (name, value) in properties where KafkaConfiguration.isSecret(name) {
            if value.count >= 3 { secrets.insert(value) }
            let separators: Set<Character> = [" ", "\t", "\n", "=", ",", ";", ":", "\"", "'"]
            for piece in value.split(whereSeparator: { separators.contains($0) }) where piece.count >= 4 {
                secrets.insert(String(piece))
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        self.secrets = secrets.sorted { $0.count > $1.count }
    }

    func redact(_ text: String) -> String {
        var text = text
        for secret in secrets where text.contains(secret) {
            text = text.replacing(secret, with: "[redacted]")
        }
        return text
    }
}

extension Duration {
    /// Whole milliseconds, rounded down, as librdkafka's `*.ms` properties take them.
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
