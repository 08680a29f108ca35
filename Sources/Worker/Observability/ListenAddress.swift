// The address the observability port listens on, as written in config: `0.0.0.0:9090`, `[::]:9090`,
// `127.0.0.1:0` (any free port), `:9090` (every IPv4 interface).

import Glibc

/// Why a listen address could not be read.
public struct ListenAddressError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// An IP literal and a port to listen on.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 or IPv6 literal, without brackets.
    public var host: String
    /// 0 asks the system for a free port.
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Reads `HOST:PORT`, `[IPV6]:PORT` or `:PORT`; `localhost` means 127.0.0.1.
    public init(parsing text: String) throws(ListenAddressError) {
        let expected = "expected HOST:PORT such as 0.0.0.0:9090, [::]:9090 or :9090"
        var hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw ListenAddressError(message: "listen address '\(text)': unclosed '[' or no port; \(expected)")
            }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw ListenAddressError(message: "listen address '\(text)' has no port; \(expected)")
            }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") {
                throw ListenAddressError(
                    message: "listen address '\(text)': put an IPv6 address in brackets; \(expected)")
            }
        }
        guard let port = UInt16(portPart) else {
            throw ListenAddressError(message: "listen address '\(text)': port '\(portPart)' is not a number 0-65535")
        }
        if hostPart.isEmpty { hostPart = "0.0.0.0" }
        if hostPart == "localhost" { hostPart = "127.0.0.1" }
        let host = String(hostPart)
        guard IPAddressLiteral.isIPv4(host) || IPAddressLiteral.isIPv6(host) else {
            throw ListenAddressError(message: "listen address '\(text)': '\(host)' is not an IP address; \(expected)")
        }
        self.init(host: host, port: port)
    }

    public var isIPv6: Bool { host.contains(":") }

    public var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

enum IPAddressLiteral {
    static func isIPv4(_ text: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, text, &address) == 1
    }

    static func isIPv6(_ text: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, text, &address) == 1
    }
}
