import Rules

/// A place for a policy evaluator, kept out of line. A `PolicyEvaluator` was 2.6 KB (several hundred bytes since
/// it holds its policy and route by reference); the exchange and each body stage have a place for one, and
/// inline that space made each of them a 3 KB object that every request allocated (and zeroed) even without
/// rules. Out of line, a request without rules allocates nothing for it, and one with rules one box per holder,
/// reused when the evaluator is stored back.
struct EvaluatorSlot {
    private final class Box {
        var value: PolicyEvaluator?
        init(_ value: PolicyEvaluator) { self.value = value }
    }

    private var box: Box?

    init(_ value: PolicyEvaluator?) {
        box = value.map(Box.init)
    }

    var value: PolicyEvaluator? {
        get { box?.value }
        set {
            if let newValue {
                put(newValue)
            } else if isKnownUniquelyReferenced(&box), let box {
                box.value = nil
            }
        }
    }

    /// Stores `value` by moving it in (a caller's `value = ev` copies `ev`: a retain of each of its references,
    /// and the caller's copy released after). Use it with `consume` for an evaluator taken out with `take()`.
    mutating func put(_ value: consuming PolicyEvaluator) {
        // A slot is never shared, but if it were, a store must not change the other holder's evaluator.
        if isKnownUniquelyReferenced(&box), let box {
            box.value = consume value
        } else {
            box = Box(value)
        }
    }

    /// Moves the evaluator out, leaving the slot empty until it is stored back (`value = ...`). The copy is then
    /// the only holder of the evaluator's collections (the names seen, the repeat counts), so updating it does
    /// not copy them; a copy read with `value` would share them, and its first update would copy them all, for
    /// every part of a request.
    mutating func take() -> PolicyEvaluator? { box?.value.take() }

    /// Whether the slot holds no evaluator, found without copying it (`value` returns a copy).
    var isEmpty: Bool {
        guard let box else { return true }
        if case .none = box.value { return true }
        return false
    }
}
