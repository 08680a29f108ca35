// `apns.proxy` and `apns.proxy_credentials_file`: decoded with every problem at its file:line:column,
// credentials only from a file, and the environment's HTTPS_PROXY / NO_PROXY when the config says nothing.

import APNs
import Foundation
import HTTP2
import Testing

@testable import Worker

@Suite struct ProxyConfigurationTests {
    /// The key file must exist: the loader checks files.
    static let keyFile: String = {
        let path = NSTemporaryDirectory() + "proxy-config-key-\(getpid()).p8"
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        return path
    }()

    func yaml(_ apns: String) -> [UInt8] {
        Array(
            """
            kafka: {brokers: [k1:9092]}
            credentials:
              team-key: {type: token, key_file: \(Self.keyFile), key_id: ABC123DEFG, team_id: DEF123GHIJ}
            apps: {com.example.chat: {credential: team-key}}
            apns:
            \(apns)
            """.utf8)
    }

    @Test func aProxyURLIsTakenAndUsedForBothEnvironments() throws {
        let configuration = try ConfigurationLoader.load(
            bytes: yaml("  proxy: http://proxy.internal:3128"), file: "w.yaml", environment: [:]
        ).configuration
        #expect(configuration.apns.proxySetting == .url("http://proxy.internal:3128"))
        let proxy = try configuration.apns.proxy(
            forEndpoint: configuration.apns.productionURL, environment: ["HTTPS_PROXY": "http://ignored:1"])
        #expect(proxy == HTTPProxy(host: "proxy.internal", port: 3128))
    }

    @Test func inlineCredentialsAreRefusedAtTheirPositionWithoutRepeatingThem() {
        #expect {
            _ = try ConfigurationLoader.load(
                bytes: yaml("  proxy: http://user:hunter2@proxy:3128"), file: "w.yaml", environment: [:])
        } throws: { error in
            let text = "\(error)"
            return text.contains("w.yaml:6:3: apns.proxy: invalid proxy URL: it carries credentials")
                && text.contains("apns.proxy_credentials_file") && !text.contains("hunter2")
        }
    }

    @Test func noneIgnoresTheEnvironmentAndRefusesACredentialsFile() throws {
        let configuration = try ConfigurationLoader.load(
            bytes: yaml("  proxy: none"), file: "w.yaml", environment: [:]
        ).configuration
        #expect(
            try configuration.apns.proxy(
                forEndpoint: configuration.apns.productionURL, environment: ["HTTPS_PROXY": "http://p:1"]) == nil)
        #expect(throws: ConfigurationError.self) {
            _ = try ConfigurationLoader.load(
                bytes: yaml("  proxy: none\n  proxy_credentials_file: /c"), file: "w.yaml", environment: [:])
        }
    }

    @Test func withoutAProxyTheEnvironmentDecidesAndTheFileSuppliesCredentials() throws {
        let path = NSTemporaryDirectory() + "worker-proxy-credentials-\(getpid())"
        try "svc:pw\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        var apns = WorkerConfiguration.APNs()
        apns.proxyCredentialsFile = path
        let environment = ["https_proxy": "http://egress:3128", "NO_PROXY": "localhost"]
        let proxy = try #require(try apns.proxy(forEndpoint: apns.productionURL, environment: environment))
        #expect(proxy.endpoint == "egress:3128" && proxy.credentials?.username == "svc")
        let exempt = ["HTTPS_PROXY": "http://egress:3128", "NO_PROXY": ".apple.com"]
        #expect(try apns.proxy(forEndpoint: apns.productionURL, environment: exempt) == nil)
        #expect(try apns.proxy(forEndpoint: apns.productionURL, environment: [:]) == nil)
    }
}
