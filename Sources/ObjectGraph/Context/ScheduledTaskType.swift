extension ManagedObjectContext {
    /// When ``ManagedObjectContext/perform(schedule:isolation:_:)`` runs its body
    /// (Core Data: `NSManagedObjectContext.ScheduledTaskType`).
    public enum ScheduledTaskType: Hashable, Sendable {
        /// At once when the caller already runs on the context's queue — a
        /// main-queue context called from the main actor — and otherwise after
        /// the blocks already on the queue. The default, as in Core Data.
        case immediate
        /// Always after the blocks already on the context's queue, even when the
        /// caller runs on it: use it to wait until what was scheduled before has run.
        case enqueued
    }
}
