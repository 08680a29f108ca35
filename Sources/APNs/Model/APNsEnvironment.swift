// Which APNs service a device token belongs to. A token works in exactly one of them.

/// The APNs service a request goes to: sandbox for development builds, production for the App Store,
/// TestFlight and ad-hoc builds. A token sent to the wrong one fails with 400 BadDeviceToken.
public enum APNsEnvironment: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case sandbox
    case production

    /// The host name, also the TLS server name (SNI) and the `:authority`.
    public var host: String {
        switch self {
        case .sandbox: return "api.sandbox.push.apple.com"
        case .production: return "api.push.apple.com"
        }
    }

    /// The standard HTTPS port.
    public static let port = 443
    /// The port Apple also serves on, for networks that block outgoing 443.
    public static let alternatePort = 2197

    public var description: String { rawValue }

    /// Parses `sandbox`, `development` (Apple's name for the sandbox, as in the `aps-environment`
    /// entitlement) or `production`, ignoring case and surrounding whitespace.
    public init(parsing text: String) throws(APNsRequestError) {
        switch text.lowercased().filter({ !$0.isWhitespace }) {
        case "sandbox", "development": self = .sandbox
        case "production": self = .production
        default:
            throw APNsRequestError(
                .environmentUnknown, field: "environment",
                "'\(text)' is not an APNs environment; use sandbox (also called development) or production")
        }
    }
}
