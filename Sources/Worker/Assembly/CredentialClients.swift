// Turns the configured credentials into APNs clients: loads every .p8 key and certificate at start-up
// (so a bad credential stops the worker with its name and the fix), and makes one client per
// (credential, environment), shared by the apps that use the credential.

public import APNs
import Foundation
import HTTP2

/// What the worker authenticates with, loaded.
public struct LoadedCredential: Sendable {
    public var name: String
    public var signer: ProviderTokenSigner?
    public var identity: CertificateIdentity?

    public init(name: String, signer: ProviderTokenSigner? = nil, identity: CertificateIdentity? = nil) {
        self.name = name
        self.signer = signer
        self.identity = identity
    }
}

public enum CredentialClients {
    /// Loads every credential; throws one error listing every credential that failed.
    public static func load(_ configuration: WorkerConfiguration) throws(ConfigurationError) -> [String:
        LoadedCredential]
    {
        var loaded: [String: LoadedCredential] = [:]
        var problems: [ConfigurationProblem] = []
        for (name, credential) in configuration.credentials.sorted(by: { $0.key < $1.key }) {
            do {
                switch credential {
                case .token(let keyFile, let keyID, let teamID):
                    let key = try ProviderTokenKey(contentsOfFile: keyFile, keyID: keyID, teamID: teamID)
                    let signer = try ProviderTokenSigner(key: key)
                    _ = try signer.token()  // proves the key signs before the first push needs it
                    loaded[name] = LoadedCredential(name: name, signer: signer, identity: nil)
                case .certificate(let certFile, let passwordFile, let keyFile):
                    let password = try passwordFile.map { file throws(CredentialError) in
                        try CredentialFile.readPassword(file)
                    }
                    let identity = try CertificateIdentity(
                        certificateFile: certFile, keyFile: keyFile, password: password)
                    loaded[name] = LoadedCredential(name: name, signer: nil, identity: identity)
                }
            } catch {
                problems.append(ConfigurationProblem(path: "credentials." + name, message: "\(error)"))
            }
        }
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return loaded
    }

    /// One client per (credential, environment); apps map onto their credential's clients.
    ///
    /// - Parameters:
    ///   - attemptObserver: told about every APNs attempt as it ends (the worker's metrics).
    ///   - poolHealth: told of every pool's breaker changes.
    ///   - credentialHealth: told of every attempt's answer, to see APNs refuse a credential and accept it again.
    static func clients(
        for configuration: WorkerConfiguration, credentials: [String: LoadedCredential], group: EventLoopGroup,
        attemptObserver: (@Sendable (APNsRequest, DeliveryAttempt) -> Void)? = nil, poolHealth: APNsPoolHealth? = nil,
        credentialHealth: CredentialHealth? = nil
    ) throws -> [String: [APNsEnvironment: APNsClient]] {
        var byCredential: [String: [APNsEnvironment: APNsClient]] = [:]
        func client(_ name: String, _ environment: APNsEnvironment) throws -> APNsClient {
            if let existing = byCredential[name]?[environment] { return existing }
            guard let credential = credentials[name] else {
                throw ConfigurationError(problems: [
                    ConfigurationProblem(path: "credentials." + name, message: "is not loaded")
                ])
            }
            var clientConfiguration = APNsClient.Configuration(
                credential: credential.signer.map { .token($0) } ?? .certificate(credential.identity!))
            let url = configuration.apns.url(for: environment)
            let appleDefault =
                environment == .sandbox ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com"
            if url.trimmingCharacters(in: CharacterSet(charactersIn: "/")) != appleDefault {
                clientConfiguration.endpointOverride = url
            }
            if let caFile = configuration.apns.caFile { clientConfiguration.trustRoots = .caFile(caFile) }
            clientConfiguration.connectionsPerEnvironment = configuration.apns.connections
            clientConfiguration.maximumConnectionsPerEnvironment = configuration.apns.maxConnections
            clientConfiguration.maximumConcurrentStreamsPerConnection = configuration.apns.maxStreams
            // Every queued request belongs to a record in flight, so the cap on records already bounds the
            // queue; a queue shorter than what the cap lets in only turns the surplus into resends.
            clientConfiguration.maximumQueuedRequests = max(
                clientConfiguration.maximumQueuedRequests, configuration.pipeline.maxInFlightRecords * 4)
            clientConfiguration.requestTimeout = .milliseconds(Int(configuration.apns.requestTimeout * 1000))
            let pool = APNsPoolHealth.poolName(environment: environment, credential: name)
            clientConfiguration.attemptObserver = attemptObserver
            if let credentialHealth {
                clientConfiguration.attemptObserver = { request, attempt in
                    attemptObserver?(request, attempt)
                    credentialHealth.observe(pool: pool, attempt)
                }
            }
            if let poolHealth {
                clientConfiguration.onBreakerTransition = { _, transition in
                    poolHealth.transition(pool: pool, transition)
                }
            }
            let made = try APNsClient(configuration: clientConfiguration, group: group)
            byCredential[name, default: [:]][environment] = made
            return made
        }
        var byApp: [String: [APNsEnvironment: APNsClient]] = [:]
        for (bundle, app) in configuration.apps {
            for environment in APNsEnvironment.allCases {
                byApp[bundle, default: [:]][environment] = try client(app.credentialName(for: environment), environment)
            }
        }
        return byApp
    }

    /// The retry policy of the configuration.
    public static func retryPolicy(_ retry: WorkerConfiguration.Retry) -> RetryPolicy {
        RetryPolicy(
            maximumAttempts: retry.maxAttempts, maximumTotalTime: .milliseconds(Int(retry.maxTotalTime * 1000)),
            backoff: ExponentialBackoff(
                initial: .milliseconds(Int(retry.baseBackoff * 1000)),
                maximum: .milliseconds(Int(retry.maxBackoff * 1000))),
            maximumHoldTime: .milliseconds(Int(retry.maxHold * 1000)))
    }
}
