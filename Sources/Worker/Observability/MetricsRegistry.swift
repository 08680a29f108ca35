// A small Prometheus metrics registry: counter, gauge and histogram families with labels, and their
// exposition in text format 0.0.4 for /metrics.

import Synchronization

/// Why a metric could not be registered: a programming error in a metric definition, named precisely.
public struct MetricsRegistryError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// The metrics of one process, rendered together on /metrics.
///
/// Register each metric once at start-up (names are checked against Prometheus' rules and for clashes),
/// keep the returned family, and resolve label children ahead of the hot path.
///
/// - Important: Thread-safe. Registration and `exposition()` take a lock; bumping a resolved child does not.
public final class MetricsRegistry: Sendable {
    private struct State {
        var families: [any ExposableFamily] = []
        var reservedNames: Set<String> = []
        var collectHooks: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    /// The Content-Type of `exposition()`: Prometheus text format 0.0.4.
    public static let contentType = PrometheusText.contentType

    public init() {}

    /// Registers a counter family. The name must end in `_total`.
    ///
    /// - Parameter maxLabelSets: a guard on label cardinality: once this many label sets exist, further new
    ///   ones are counted under a child whose every label value is `other`.
    public func counter(
        _ name: String, help: String, labelNames: [String] = [], maxLabelSets: Int = 1000
    ) throws(MetricsRegistryError) -> CounterFamily {
        guard name.hasSuffix("_total") else {
            throw MetricsRegistryError(message: "counter '\(name)' must end in '_total' (Prometheus naming)")
        }
        let family = CounterFamily(
            name: name, help: help, type: "counter", labelNames: labelNames, maxLabelSets: maxLabelSets,
            makeChild: { Counter() },
            appendSamples: { counter, name, labels, output in
                PrometheusText.appendSample(
                    name: name, labels: labels(nil), value: String(counter.value), into: &output)
            })
        try register(family, reserving: [name], labelNames: labelNames)
        return family
    }

    /// Registers a gauge family. The name must not end in `_total`, which Prometheus reserves for counters.
    public func gauge(
        _ name: String, help: String, labelNames: [String] = [], maxLabelSets: Int = 1000
    ) throws(MetricsRegistryError) -> GaugeFamily {
        guard !name.hasSuffix("_total") else {
            throw MetricsRegistryError(
                message: "gauge '\(name)' must not end in '_total' (that suffix means a counter)")
        }
        let family = GaugeFamily(
            name: name, help: help, type: "gauge", labelNames: labelNames, maxLabelSets: maxLabelSets,
            makeChild: { Gauge() },
            appendSamples: { gauge, name, labels, output in
                PrometheusText.appendSample(
                    name: name, labels: labels(nil), value: PrometheusText.format(gauge.value), into: &output)
            })
        try register(family, reserving: [name], labelNames: labelNames)
        return family
    }

    /// Registers a histogram family with fixed bucket upper bounds (finite, strictly ascending; `+Inf` is added).
    /// Exposes `<name>_bucket{le=...}`, `<name>_sum` and `<name>_count`.
    public func histogram(
        _ name: String, help: String, labelNames: [String] = [], buckets: [Double], maxLabelSets: Int = 1000
    ) throws(MetricsRegistryError) -> HistogramFamily {
        let ascending = zip(buckets, buckets.dropFirst()).allSatisfy { $0 < $1 }
        guard !buckets.isEmpty, buckets.allSatisfy(\.isFinite), ascending else {
            throw MetricsRegistryError(
                message: "histogram '\(name)': buckets must be finite and strictly ascending, got \(buckets)")
        }
        guard !labelNames.contains("le") else {
            throw MetricsRegistryError(message: "histogram '\(name)': label name 'le' is reserved for bucket bounds")
        }
        let bounds = buckets.map(PrometheusText.format) + ["+Inf"]
        let family = HistogramFamily(
            name: name, help: help, type: "histogram", labelNames: labelNames, maxLabelSets: maxLabelSets,
            makeChild: { Histogram(upperBounds: buckets) },
            appendSamples: { histogram, name, labels, output in
                let snapshot = histogram.snapshot
                for (bound, count) in zip(bounds, snapshot.cumulativeCounts) {
                    PrometheusText.appendSample(
                        name: name, suffix: "_bucket", labels: labels(("le", bound)), value: String(count),
                        into: &output)
                }
                PrometheusText.appendSample(
                    name: name, suffix: "_sum", labels: labels(nil), value: PrometheusText.format(snapshot.sum),
                    into: &output)
                PrometheusText.appendSample(
                    name: name, suffix: "_count", labels: labels(nil), value: String(snapshot.count), into: &output)
            })
        let series = [name, name + "_bucket", name + "_sum", name + "_count"]
        try register(family, reserving: series, labelNames: labelNames)
        return family
    }

    /// Runs `hook` at the start of every exposition, before values are read: the place to set gauges that
    /// are computed rather than tracked (an age, a queue length read from elsewhere).
    ///
    /// - Important: The hook runs on the thread that scrapes; it must be quick and must not block.
    public func onCollect(_ hook: @escaping @Sendable () -> Void) {
        state.withLock { $0.collectHooks.append(hook) }
    }

    /// Every registered family in registration order, in Prometheus text format 0.0.4.
    public func exposition() -> [UInt8] {
        let hooks = state.withLock { $0.collectHooks }
        for hook in hooks { hook() }
        let families = state.withLock { $0.families }
        var output: [UInt8] = []
        output.reserveCapacity(16 * 1024)
        for family in families { family.appendExposition(into: &output) }
        return output
    }

    private func register(
        _ family: some ExposableFamily, reserving names: [String], labelNames: [String]
    ) throws(MetricsRegistryError) {
        let name = family.name
        guard PrometheusText.isValidMetricName(name) else {
            throw MetricsRegistryError(message: "metric name '\(name)' is invalid: use [a-zA-Z_:][a-zA-Z0-9_:]*")
        }
        guard !family.help.isEmpty else {
            throw MetricsRegistryError(message: "metric '\(name)' needs help text")
        }
        for label in labelNames where !PrometheusText.isValidLabelName(label) {
            throw MetricsRegistryError(
                message: "metric '\(name)': label name '\(label)' is invalid: "
                    + "use [a-zA-Z_][a-zA-Z0-9_]*, not starting '__'")
        }
        guard Set(labelNames).count == labelNames.count else {
            throw MetricsRegistryError(message: "metric '\(name)': label names repeat: \(labelNames)")
        }
        let clash: String? = state.withLock { state in
            if let taken = names.first(where: state.reservedNames.contains) { return taken }
            state.reservedNames.formUnion(names)
            state.families.append(family)
            return nil
        }
        if let clash {
            throw MetricsRegistryError(
                message: "metric '\(name)' clashes with an already registered series '\(clash)'")
        }
    }
}

/// What the registry needs of a family to render it, whatever its child type.
protocol ExposableFamily: Sendable {
    var name: String { get }
    var help: String { get }
    func appendExposition(into output: inout [UInt8])
}

public typealias CounterFamily = MetricFamily<Counter>
public typealias GaugeFamily = MetricFamily<Gauge>
public typealias HistogramFamily = MetricFamily<Histogram>

/// One metric name and its children, one per set of label values.
///
/// - Important: Thread-safe. `labels(...)` takes a lock and may allocate the child on first use: call it
///   once per label set and keep the child for the hot path. Never use unbounded values (device tokens,
///   event ids) as labels; past `maxLabelSets` new label sets fold into one child labelled `other`.
public final class MetricFamily<Child: AnyObject & Sendable>: Sendable {
    /// Builds a sample block for a child; the closure's argument adds one extra label (histograms' `le`).
    typealias AppendSamples =
        @Sendable (
            Child, _ name: String, _ labels: ((name: String, value: String)?) -> [UInt8], inout [UInt8]
        ) -> Void

    public let name: String
    public let help: String
    public let labelNames: [String]
    /// The Prometheus type: counter, gauge or histogram.
    public let type: String
    public let maxLabelSets: Int
    private let makeChild: @Sendable () -> Child
    private let appendSamples: AppendSamples
    private let children: Mutex<[[String]: Child]>

    init(
        name: String, help: String, type: String, labelNames: [String], maxLabelSets: Int,
        makeChild: @escaping @Sendable () -> Child, appendSamples: @escaping AppendSamples
    ) {
        self.name = name
        self.help = help
        self.type = type
        self.labelNames = labelNames
        self.maxLabelSets = max(1, maxLabelSets)
        self.makeChild = makeChild
        self.appendSamples = appendSamples
        // An unlabelled metric has exactly one child, present (at zero) from the start.
        children = Mutex(labelNames.isEmpty ? [[]: makeChild()] : [:])
    }

    /// The child for these label values, in the order of `labelNames`; created on first use.
    public func labels(_ values: String...) -> Child {
        labels(values)
    }

    /// The child for these label values, in the order of `labelNames`; created on first use.
    public func labels(_ values: [String]) -> Child {
        precondition(
            values.count == labelNames.count,
            "metric \(name) takes \(labelNames.count) label values (\(labelNames)), got \(values.count)")
        return children.withLock { children in
            if let child = children[values] { return child }
            let key = children.count < maxLabelSets ? values : Array(repeating: "other", count: values.count)
            if let child = children[key] { return child }
            let child = makeChild()
            children[key] = child
            return child
        }
    }

    /// Forgets the child for these label values (a revoked partition, a closed pool), so it is no longer exposed.
    public func remove(_ values: String...) {
        _ = children.withLock { $0.removeValue(forKey: values) }
    }

    /// The number of label sets currently exposed.
    public var labelSetCount: Int { children.withLock { $0.count } }
}

extension MetricFamily: ExposableFamily {
    func appendExposition(into output: inout [UInt8]) {
        output.append(contentsOf: "# HELP \(name) ".utf8)
        PrometheusText.appendHelp(help, into: &output)
        output.append(contentsOf: "\n# TYPE \(name) \(type)\n".utf8)
        let sorted = children.withLock { Array($0) }.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        for (values, child) in sorted {
            appendSamples(
                child, name,
                { extra in
                    PrometheusText.labelBlock(names: self.labelNames, values: values, extra: extra)
                }, &output)
        }
    }
}

/// A family's children looked up by a cheap key (an enum, a status code) instead of their label strings.
///
/// Hot paths count several series per notification. `labels(_:)` builds a `[String]`, folds each value
/// into its bounded set and hashes the strings under the family's lock; this lock hashes a small key once.
/// Bounded: past `capacity` keys it stops remembering and asks the family each time (the family itself
/// folds excess label sets into `other`). Not for families whose children are removed (it would keep
/// counting into a removed child).
public final class SeriesCache<Key: Hashable & Sendable, Child: AnyObject & Sendable>: Sendable {
    private let family: MetricFamily<Child>
    private let labelValues: @Sendable (Key) -> [String]
    private let capacity: Int
    private let children = Mutex<[Key: Child]>([:])

    /// - Parameter labelValues: the family's label values for a key, in the order of its label names.
    public init(_ family: MetricFamily<Child>, capacity: Int = 256, labelValues: @escaping @Sendable (Key) -> [String])
    {
        self.family = family
        self.labelValues = labelValues
        self.capacity = capacity
    }

    public subscript(key: Key) -> Child {
        if let child = children.withLock({ $0[key] }) { return child }
        let child = family.labels(labelValues(key))
        children.withLock { if $0.count < capacity { $0[key] = child } }
        return child
    }
}

/// A family's children for the cases of a small enum (an outcome's status, an environment), each created
/// on first use and then found without a lock.
///
/// For the series counted once or more per notification: `SeriesCache` takes a lock and hashes its key on
/// every use, and two event loops counting the same outcome contend for it. A child is created only when
/// its case first occurs, so /metrics shows the same series as with `labels(_:)`. Not for families whose
/// children are removed.
///
/// A struct over non-generic slots: a generic class's fields are found through its type metadata, a
/// run-time lookup on every access (`scripts/bench-counts.sh` counted one more per use).
public struct CaseSeries<Key: CaseIterable & Equatable & Sendable, Child: AnyObject & Sendable>: Sendable {
    // `Key.allCases` builds a new array on every call; this one is built once.
    private let keys: [Key]
    private let slots: [LazyChildSlot]
    private let family: MetricFamily<Child>
    private let labelValues: @Sendable (Key) -> [String]

    /// - Parameter labelValues: the family's label values for a case, in the order of its label names.
    public init(_ family: MetricFamily<Child>, labelValues: @escaping @Sendable (Key) -> [String]) {
        self.keys = Array(Key.allCases)
        self.slots = keys.map { _ in LazyChildSlot() }
        self.family = family
        self.labelValues = labelValues
    }

    public subscript(key: Key) -> Child {
        let slot = slots[keys.firstIndex(of: key)!]
        if let child = slot.load() { return Unmanaged<Child>.fromOpaque(child).takeUnretainedValue() }
        // Two loops racing here get the same child: the family keeps one per label set.
        let child = family.labels(labelValues(key))
        slot.storeIfUnset(Unmanaged.passUnretained(child).toOpaque())
        return child
    }
}

/// One child of a `CaseSeries`, set once and kept (retained) until the slot goes. Its address in an
/// `Atomic<UInt>` rather than an `AtomicLazyReference`: that one's `load` is not specialized, and looked up
/// its type's metadata at run time on every call (4.4 lookups per outcome in `scripts/bench-counts.sh`).
final class LazyChildSlot: Sendable {
    private let address = Atomic<UInt>(0)

    func load() -> UnsafeRawPointer? { UnsafeRawPointer(bitPattern: address.load(ordering: .acquiring)) }

    /// Keeps `object` (retaining it) unless a child is already set.
    func storeIfUnset(_ object: UnsafeRawPointer) {
        let retained = Unmanaged<AnyObject>.fromOpaque(object).retain()
        let (stored, _) = address.compareExchange(
            expected: 0, desired: UInt(bitPattern: object), ordering: .acquiringAndReleasing)
        if !stored { retained.release() }
    }

    deinit {
        if let object = load() { Unmanaged<AnyObject>.fromOpaque(object).release() }
    }
}
