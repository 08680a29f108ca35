// A fixed-capacity FIFO ring buffer: the pool's wait queue, which must never grow without bound.

/// A first-in first-out queue that holds at most `capacity` elements.
struct BoundedQueue<Element> {
    private var storage: [Element?]
    private var head = 0
    private(set) var count = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a bounded queue needs room for one element")
        storage = Array(repeating: nil, count: capacity)
    }

    var capacity: Int { storage.count }
    var isEmpty: Bool { count == 0 }
    var isFull: Bool { count == storage.count }

    /// Appends at the back; returns false (and drops nothing) when full.
    @discardableResult
    mutating func append(_ element: Element) -> Bool {
        guard count < storage.count else { return false }
        storage[(head + count) % storage.count] = element
        count += 1
        return true
    }

    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = storage[head]
        storage[head] = nil
        head = (head + 1) % storage.count
        count -= 1
        return element
    }

    var first: Element? { count > 0 ? storage[head] : nil }

    /// Removes every element for which `shouldRemove` is true, keeping the others in order.
    mutating func removeAll(where shouldRemove: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        var kept: [Element] = []
        while let element = popFirst() {
            if shouldRemove(element) { removed.append(element) } else { kept.append(element) }
        }
        for element in kept { append(element) }
        return removed
    }
}
