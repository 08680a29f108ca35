// `apns.proxy` and `apns.proxy_credentials_file`: decoding them (credentials only from a file, never in
// the URL), and choosing each pool's proxy when the worker starts: the configured one, none, or the
// environment's HTTPS_PROXY / NO_PROXY when the configuration says nothing.

import APNs
import Foundation
public import HTTP2
import JSON

extension WorkerConfiguration.APNs {
    /// How APNs is reached.
    public enum ProxySetting: Sendable, Equatable {
        /// Nothing configured: `HTTPS_PROXY` (or `https_proxy`) unless `NO_PROXY` exempts the host.
        case fromEnvironment
        /// `apns.proxy: none`: always direct, whatever the environment says.
        case direct
        /// `apns.proxy: http://host:port`.
        case url(String)
    }

    /// The proxy for connections to `endpointURL` (`https://host[:port]`), with its credentials read
    /// from `proxyCredentialsFile`; nil for a direct connection.
    ///
    /// - Throws: `ConfigurationError` naming the key (or the environment variable) that is wrong.
    public func proxy(forEndpoint endpointURL: String, environment: [String: String]) throws(ConfigurationError)
        -> HTTPProxy?
    {
        func failure(_ path: String, _ message: String) -> ConfigurationError {
            ConfigurationError(problems: [ConfigurationProblem(path: path, message: message)])
        }
        var proxy: HTTPProxy?
        do {
            switch proxySetting {
            case .direct:
                return nil
            case .url(let url):
                proxy = try HTTPProxy(url: url, source: "apns.proxy")
            case .fromEnvironment:
                let (host, port) = try ConnectionPool.Configuration.parse(url: endpointURL)
                proxy = try HTTPProxy.fromEnvironment(environment, host: host, port: port)
            }
        } catch {
            throw failure(proxySetting == .fromEnvironment ? "" : "apns.proxy", error.message)
        }
        guard var proxy else { return nil }
        if let proxyCredentialsFile {
            do {
                proxy.credentials = try HTTPProxy.Credentials(contentsOfFile: proxyCredentialsFile)
            } catch {
                throw failure("apns.proxy_credentials_file", error.message)
            }
        }
        return proxy
    }
}

extension ConfigurationDecoder {
    /// Reads `proxy` and `proxy_credentials_file` of the `apns` mapping into `apns`.
    mutating func decodeProxy(_ object: JSONObject, into apns: inout WorkerConfiguration.APNs) {
        if let text = string(object, "proxy", "apns") {
            if text.lowercased() == "none" {
                apns.proxySetting = .direct
            } else {
                do {
                    _ = try HTTPProxy(url: text, source: "apns.proxy")
                    apns.proxySetting = .url(text)
                } catch {
                    // The message leaves out whatever stood before an '@' (a password).
                    problem("apns.proxy", String(error.message.dropFirst("apns.proxy: ".count)) + ", or none")
                }
            }
        }
        apns.proxyCredentialsFile = string(object, "proxy_credentials_file", "apns")
        checkFile(apns.proxyCredentialsFile, at: "apns.proxy_credentials_file")
        if apns.proxyCredentialsFile != nil, apns.proxySetting == .direct {
            problem("apns.proxy_credentials_file", "is set but apns.proxy is none; remove one of them")
        }
    }
}
