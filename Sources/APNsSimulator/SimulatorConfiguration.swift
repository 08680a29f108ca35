// Everything a simulator is started with: where it listens, its TLS identity, how clients
// authenticate, device states, faults and how much it records.

public import APNs

/// A provider-token key the simulator trusts.
public struct SimulatorProviderKey: Sendable, Hashable {
    /// The 10-character Key ID (`kid`).
    public var keyID: String
    /// `-----BEGIN PUBLIC KEY-----` PEM of the P-256 key (or the `.p8` private key's public half).
    public var publicKeyPEM: String
    /// When set, tokens of this key must carry this `iss`.
    public var teamID: String?

    public init(keyID: String, publicKeyPEM: String, teamID: String? = nil) {
        self.keyID = keyID
        self.publicKeyPEM = publicKeyPEM
        self.teamID = teamID
    }
}

/// How clients must authenticate.
public enum SimulatorAuthentication: Sendable, Hashable {
    /// Accept every request without checking credentials (benchmarks, demos).
    case none
    /// Token authentication: every request needs `authorization: bearer <JWT>` signed by one of `keys`.
    /// - Parameters:
    ///   - maximumAgeSeconds: tokens older than this get 403 ExpiredProviderToken. Apple: 3600.
    ///   - minimumUpdateIntervalSeconds: a connection changing its token sooner gets
    ///     429 TooManyProviderTokenUpdates. Apple: 1200.
    case providerToken(
        keys: [SimulatorProviderKey], maximumAgeSeconds: Int = 3600,
        minimumUpdateIntervalSeconds: Int = 1200)
    /// Certificate authentication: the TLS handshake requires a client certificate that verifies against
    /// the CA certificates in `clientCAFile` (PEM); a client without one is refused. A certificate
    /// whose subject has a UID (as Apple's push certificates do) limits pushes to that bundle id.
    case certificate(clientCAFile: String)
}

/// The server certificate.
public enum SimulatorTLSIdentity: Sendable, Hashable {
    /// A self-signed EC P-256 certificate generated at start-up for the given DNS names and IP
    /// addresses. Default hosts: localhost and 127.0.0.1.
    case generated(hosts: [String] = ["localhost", "127.0.0.1"])
    /// PEM files; `caFile` is what clients should trust (default: the certificate file itself).
    case files(certificate: String, privateKey: String, caFile: String? = nil)
}

/// The simulator's configuration. A value type; validated by `APNsSimulator.init`.
public struct SimulatorConfiguration: Sendable, Hashable {
    /// Address to listen on, an IP literal or `localhost`. Default: `127.0.0.1`.
    public var host = "127.0.0.1"
    /// TCP port; 0 picks a free one (read it from `start()`). Default: 0.
    public var port = 0
    /// Default: a generated certificate for localhost and 127.0.0.1.
    public var tls = SimulatorTLSIdentity.generated()
    /// Where to write the CA certificate clients should trust; nil writes it to a temporary file
    /// that `stop()` removes. Default: nil.
    public var caOutputPath: String?
    /// Default: `.none`.
    public var authentication = SimulatorAuthentication.none
    /// Sandbox answers 200 with `apns-unique-id`; production does not (as Apple). Default: sandbox.
    public var environment = APNsEnvironment.sandbox
    /// Bundle ids pushes may go to; others get 400 TopicDisallowed. Empty allows any. Default: empty.
    public var allowedBundles: Set<String> = []
    public var devices = DeviceStates()
    public var faults = SimulatorFaults()
    /// Accepted notifications kept for `accepted` (the oldest are dropped first). Default: 10000.
    public var acceptedCapacity = 10_000
    /// Connections served at once (each has a thread); more are closed as soon as accepted and
    /// counted in `SimulatorStats.connectionsRefused`. Default: 512.
    public var maximumConnections = 512
    /// Seeds the generators behind fault rates and latency jitter. Default: 1.
    public var seed: UInt64 = 1

    public init() {}

    /// Checks every value; the error names the key that is wrong and what would be right.
    public func validate() throws(SimulatorError) {
        guard (0...65535).contains(port) else {
            throw SimulatorError(.configuration, "port must be between 0 and 65535, got \(port)")
        }
        guard !host.isEmpty else { throw SimulatorError(.configuration, "host must not be empty") }
        guard maximumConnections >= 1 else {
            throw SimulatorError(.configuration, "maximumConnections must be at least 1, got \(maximumConnections)")
        }
        guard acceptedCapacity >= 0 else {
            throw SimulatorError(.configuration, "acceptedCapacity must not be negative, got \(acceptedCapacity)")
        }
        if case .providerToken(let keys, let maximumAge, let interval) = authentication {
            guard !keys.isEmpty else {
                throw SimulatorError(.configuration, "token authentication needs at least one key (keyId + publicKey)")
            }
            guard maximumAge > 0, interval >= 0 else {
                throw SimulatorError(
                    .configuration,
                    "token authentication: maximumAgeSeconds must be positive and minimumUpdateIntervalSeconds "
                        + "not negative")
            }
        }
        if case .generated(let hosts) = tls, hosts.isEmpty {
            throw SimulatorError(.configuration, "a generated certificate needs at least one host name or address")
        }
        try devices.validate()
        try faults.validate()
    }
}
