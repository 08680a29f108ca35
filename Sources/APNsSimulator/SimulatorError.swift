// Errors the simulator raises while being configured or started.

/// Why the simulator could not be configured or started: what was wrong, and where.
public struct SimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The class of failure; compare errors by code.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String, Sendable, Hashable {
            case configuration, tls, network, system
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The configuration (file, options or values) is invalid.
        public static let configuration = Code(.configuration)
        /// A certificate, key or CA file could not be loaded or generated.
        public static let tls = Code(.tls)
        /// Binding or listening failed.
        public static let network = Code(.network)
        /// The operating system refused a resource (threads, descriptors).
        public static let system = Code(.system)

        public var description: String { value.rawValue }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code) error: \(message)" }

    public static func == (lhs: SimulatorError, rhs: SimulatorError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
