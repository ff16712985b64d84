/// Which queue a context runs on (Core Data: `NSManagedObjectContextConcurrencyType`).
public enum ConcurrencyType: Int, Sendable, Hashable {
    /// The context owns a private serial queue; use it through `perform` and `performAndWait`.
    case privateQueue = 1
    /// The context runs on the main queue, which must be serviced by `dispatchMain()`,
    /// `RunLoop.main` or the main actor.
    case mainQueue = 2
}
