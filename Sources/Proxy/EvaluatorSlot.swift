import Rules

/// A place for a policy evaluator, kept out of line. A `PolicyEvaluator` is about 2.6 KB; the exchange and each
/// body stage have a place for one, and inline that space made each of them a 3 KB object that every request
/// allocated (and zeroed) even without rules. Out of line, a request without rules allocates nothing for it,
/// and one with rules one box per holder, reused when the evaluator is stored back.
struct EvaluatorSlot {
    private final class Box {
        var value: PolicyEvaluator
        init(_ value: PolicyEvaluator) { self.value = value }
    }

    private var box: Box?

    init(_ value: PolicyEvaluator?) {
        box = value.map(Box.init)
    }

    var value: PolicyEvaluator? {
        get { box?.value }
        set {
            guard let newValue else {
                box = nil
                return
            }
            // A slot is never shared, but if it were, a store must not change the other holder's evaluator.
            if isKnownUniquelyReferenced(&box), let box {
                box.value = newValue
            } else {
                box = Box(newValue)
            }
        }
    }
}
