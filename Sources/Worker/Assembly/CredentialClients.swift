// Turns the configured credentials into APNs clients: loads every .p8 key and certificate at start-up
// (so a bad credential stops the worker with its name and the fix), and makes one client per
// (credential, environment), shared by the apps that use the credential.

public import APNs
import Foundation
import HTTP2
import JSON

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
    /// Loads every credential; throws one error listing every credential that failed, each problem at
    /// the key of its credential that names the file (locate them with the configuration's source).
    ///
    /// - Parameter environment: where `APNS_KEY_PASSWORD` and `APNS_CERT_PASSWORD` are read, for the
    ///   credentials that name no password file. Default: the process's environment.
    public static func load(_ configuration: WorkerConfiguration, environment: [String: String]? = nil)
        throws(ConfigurationError) -> [String: LoadedCredential]
    {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var loaded: [String: LoadedCredential] = [:]
        var problems: [ConfigurationProblem] = []
        for (name, credential) in configuration.credentials.sorted(by: { $0.key < $1.key }) {
            let password = PasswordSource(for: credential, environment: environment)
            do throws(CredentialError) {
                loaded[name] = try load(name, credential, password: password)
            } catch {
                problems.append(problem(error, credential: name, credential, password: password))
            }
        }
        guard problems.isEmpty else { throw ConfigurationError(problems: problems) }
        return loaded
    }

    private static func load(_ name: String, _ credential: WorkerConfiguration.Credential, password: PasswordSource?)
        throws(CredentialError) -> LoadedCredential
    {
        switch credential {
        case .token(let keyFile, let keyID, let teamID, _):
            let key = try ProviderTokenKey(
                contentsOfFile: keyFile, keyID: keyID, teamID: teamID, password: try password?.read())
            let signer = try ProviderTokenSigner(key: key)
            _ = try signer.token()  // proves the key signs before the first push needs it
            return LoadedCredential(name: name, signer: signer, identity: nil)
        case .certificate(let certFile, _, let keyFile):
            do throws(CredentialError) {
                let identity = try CertificateIdentity(
                    certificateFile: certFile, keyFile: keyFile, password: try password?.read())
                return LoadedCredential(name: name, signer: nil, identity: identity)
            } catch  where error.code == .wrongPassword && password?.isVariable == true {
                // APNS_CERT_PASSWORD is for the certificates that need one; one exported without a
                // password still opens.
                guard
                    let identity = try? CertificateIdentity(certificateFile: certFile, keyFile: keyFile, password: nil)
                else { throw error }
                return LoadedCredential(name: name, signer: nil, identity: identity)
            }
        }
    }

    /// Where a credential's password comes from: its password file, or else the environment variable of
    /// its kind when set.
    enum PasswordSource: Sendable {
        /// The file and the key of the credential that names it.
        case file(String, key: String)
        case variable(String, value: String)

        init?(for credential: WorkerConfiguration.Credential, environment: [String: String]) {
            let (file, key, variable): (String?, String, String) =
                switch credential {
                case .token(_, _, _, let file): (file, "key_password_file", CredentialFile.keyPasswordVariable)
                case .certificate(_, let file, _): (file, "password_file", CredentialFile.certificatePasswordVariable)
                }
            if let file {
                self = .file(file, key: key)
            } else if let value = environment[variable] {
                self = .variable(variable, value: value)
            } else {
                return nil
            }
        }

        func read() throws(CredentialError) -> String {
            switch self {
            case .file(let path, _): try CredentialFile.readPassword(path)
            case .variable(_, let value): value
            }
        }

        var isVariable: Bool {
            if case .variable = self { true } else { false }
        }

        /// How a message names it: `the password file '/run/key.pass' (key_password_file)`.
        var described: String {
            switch self {
            case .file(let path, let key): "the password file '\(path)' (\(key))"
            case .variable(let name, _): "the environment variable \(name)"
            }
        }

        /// What would be right, for a password that is wrong.
        var fix: String {
            switch self {
            case .file(let path, _): "write the password the file was encrypted with on the first line of '\(path)'"
            case .variable(let name, _): "set \(name) to the password the file was encrypted with"
            }
        }
    }

    /// A credential that did not load as a configuration problem: at the key naming the file it is about,
    /// saying which file, what is wrong, and what would be right in the configuration's words.
    static func problem(
        _ error: CredentialError, credential name: String, _ credential: WorkerConfiguration.Credential,
        password: PasswordSource?
    ) -> ConfigurationProblem {
        let path = "credentials." + name
        let (fileKey, passwordKey, variable): (String, String, String)
        var keysByFile: [(file: String?, key: String)]
        switch credential {
        case .token(let keyFile, _, _, let passwordFile):
            (fileKey, passwordKey, variable) = ("key_file", "key_password_file", CredentialFile.keyPasswordVariable)
            keysByFile = [(passwordFile, passwordKey), (keyFile, fileKey)]
        case .certificate(let certFile, let passwordFile, let keyFile):
            (fileKey, passwordKey, variable) = (
                "cert_file", "password_file", CredentialFile.certificatePasswordVariable
            )
            keysByFile = [(passwordFile, passwordKey), (keyFile, "key_file"), (certFile, fileKey)]
        }
        if error.code == .invalidKeyID { return ConfigurationProblem(path: path + ".key_id", message: error.message) }
        if error.code == .invalidTeamID {
            return ConfigurationProblem(path: path + ".team_id", message: error.message)
        }
        var key = keysByFile.first { $0.file != nil && $0.file == error.path }?.key ?? fileKey
        let subject = error.path.map { "'\($0)'" } ?? "the \(fileKey)"
        var message = error.message
        switch error.code {
        case .passwordRequired:
            message =
                "\(subject) is encrypted and no password was given; name a file holding its password with "
                + "\(passwordKey) (or set \(variable))"
                + (fileKey == "key_file"
                    ? ", or decrypt the key once with 'openssl pkey -in KEY -out KEY.decrypted'" : "")
        case .wrongPassword:
            if case .file = password { key = passwordKey }
            if let password {
                message =
                    "\(subject) does not open with the password from \(password.described): the password is "
                    + "wrong; \(password.fix)"
            }
        default:
            break
        }
        return ConfigurationProblem(path: path + "." + key, message: message)
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
            clientConfiguration.proxy = try configuration.apns.proxy(
                forEndpoint: url, environment: ProcessInfo.processInfo.environment)
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

    /// Says once, at start, which proxy the APNs connections go through (none: nothing is logged), with
    /// the user and file of its credentials, never their password.
    static func logProxies(_ clients: [String: [APNsEnvironment: APNsClient]], logger: Logger) {
        var proxies: [String: HTTPProxy] = [:]
        for byEnvironment in clients.values {
            for client in byEnvironment.values {
                if let proxy = client.configuration.proxy { proxies[proxy.endpoint] = proxy }
            }
        }
        for (endpoint, proxy) in proxies.sorted(by: { $0.key < $1.key }) {
            var fields: JSONObject = ["proxy": .string(endpoint)]
            if let credentials = proxy.credentials {
                fields["proxy_user"] = .string(credentials.username)
                fields["proxy_credentials_file"] = .string(credentials.source)
            }
            logger.info("APNs connections go through the proxy \(endpoint) (HTTP CONNECT)", fields)
        }
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
