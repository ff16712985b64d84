import Foundation
import Observation

/// An object of the graph, living in one context (Core Data: `NSManagedObject`).
///
/// Use it as it is, through ``value(forKey:)`` and ``setValue(_:forKey:)``, for
/// any entity; or subclass it and declare typed properties with ``Managed``:
///
/// ```swift
/// final class Ticker: ManagedObject {
///     @Managed var symbol: String
///     @Managed var price: Double
///     @Managed var company: Company?
/// }
///
/// let ticker = Ticker(context: context)
/// ticker.symbol = "ACME"
/// try context.save()
/// ```
///
/// An object belongs to its context's queue: use it only inside the context's
/// `perform` blocks (or on the main queue for a main-queue context), and pass
/// its ``objectID`` to other queues.
///
/// Values live in an array of slots indexed by the entity's property layout.
/// A fault holds only its ID and context; its values are loaded on first access.
///
/// ## Topics
/// ### Lifecycle hooks
/// - ``awakeFromInsert()``
/// - ``awakeFromFetch()``
/// - ``willSave()``
/// - ``didSave()``
/// - ``prepareForDeletion()``
/// - ``validateForInsert()``
/// - ``validateForUpdate()``
/// - ``validateForDelete()``
open class ManagedObject {
    /// The object's entity.
    ///
    /// Read from the object's ID, which holds it anyway: a stored copy would
    /// cost every object a word (see ``objectID``'s setter for why the two
    /// always agree).
    @inlinable public final var entity: EntityDescription { storedID.entity }
    /// The object's identity; temporary until its context saves it to a store.
    ///
    /// An ID given to the object keeps the object's own entity: IDs of two
    /// copies of a model are equal (by entity name), but the object's slots
    /// follow its own entity's layout, which ``entity`` reads from here.
    public final internal(set) var objectID: ObjectID {
        @inlinable get { storedID }
        set { storedID = newValue.entity === storedID.entity ? newValue : newValue.withEntity(storedID.entity) }
    }
    // Inlinable readers: `@Managed` accessors, inlined into users' modules,
    // read the entity on every access.
    @usableFromInline @exclusivity(unchecked) final var storedID: ObjectID
    /// The context the object lives in; nil once it is removed from it.
    public final internal(set) var managedObjectContext: ManagedObjectContext? {
        get { contextReference?.takeUnretainedValue() }
        set { contextReference = newValue.map { Unmanaged.passUnretained($0) } }
    }
    /// Unretained rather than weak: every path that takes an object out of its
    /// context's registry clears it, and so does the context's `deinit` for the
    /// objects it still holds, so it never outlives the context. A weak
    /// reference would give the context a side table, and every retain and
    /// release of the context would take the runtime's slow path.
    /// Internal but inlinable: the `@Managed` getters read it to learn whether
    /// the context observes reads (``ManagedObjectContext/isObservable``).
    @usableFromInline @exclusivity(unchecked) internal final var contextReference: Unmanaged<ManagedObjectContext>?

    // MARK: - Internal state (protected by the context's queue)
    //
    // `@exclusivity(unchecked)`, for the reason given on the context's state:
    // confined to one queue, and hot (several accesses per property access).

    /// The current values, indexed by the entity's slot layout; empty while a fault.
    ///
    /// Writing here forgets the to-many member indexes (see ``ToManyMemberIndex``);
    /// ``replaceSlot(_:at:)`` forgets only the one of the slot it writes.
    package final var slots: ContiguousArray<PropertyValue> {
        get { storedSlots }
        set {
            keepSnapshot()
            forgetToManyMemberIndexes()
            if let observation = box?.observation {
                replaceValuesTellingObservers(with: newValue, observation.registrar)
            } else {
                storedSlots = newValue
            }
        }
        _modify {
            keepSnapshot()
            forgetToManyMemberIndexes()
            if let observation = box?.observation {
                let registrar = observation.registrar
                // Observed (rare): changed on a copy, so that the slots whose
                // values differ are known before the values change.
                var values = storedSlots
                yield &values
                replaceValuesTellingObservers(with: values, registrar)
            } else {
                yield &storedSlots
            }
        }
    }
    /// The values last read from or written to the parent store; nil if never saved.
    package final var snapshot: ContiguousArray<PropertyValue>? {
        get { snapshotIsSlots ? storedSlots : box?.snapshot }
        set {
            snapshotIsSlots = false
            if let newValue {
                madeBox.snapshot = newValue
            } else if let box {
                box.snapshot = nil
                unboxIfPossible()
            }
        }
    }
    /// The row version of `snapshot` (`Z_OPT`), for optimistic locking.
    package final var snapshotVersion: Int64 {
        get {
            if compactVersion == Self.versionInBox, let box { return box.version }
            return Int64(compactVersion)
        }
        set {
            if newValue >= 0 && newValue < Int64(Self.versionInBox) {
                compactVersion = UInt32(newValue)
            } else {
                madeBox.version = newValue
                compactVersion = Self.versionInBox
            }
        }
    }

    // The stored fields make an instance of 64 bytes (an 80-byte heap block,
    // with room for eight `@Managed` properties of a subclass): the ID (two
    // words), the context, the values, the box and a word of small fields,
    // in this order so that the small ones share the last word. What only
    // some objects need goes in the box.

    // Read by the inlined `@Managed` getters (``slotValue(at:)``); written here only.
    // Final, as `state` is: the inlined getters then load them in place,
    // where an overridable property is a call through the class's vtable.
    @usableFromInline @exclusivity(unchecked) internal private(set) final var storedSlots: ContiguousArray<PropertyValue> = []
    /// A snapshot of the object's own, member indexes, prefetched objects or
    /// a version that needs 64 bits; nil for most objects.
    @exclusivity(unchecked) private var box: Box?
    /// `snapshotVersion` when it fits in 32 bits (every row that was saved
    /// fewer than four billion times); `versionInBox` when the box holds it.
    @exclusivity(unchecked) private var compactVersion: UInt32 = 0
    /// Whether the snapshot is the values themselves, as after a fetch or a
    /// save, until the values first change: then the box takes a copy.
    @exclusivity(unchecked) private var snapshotIsSlots = false
    @usableFromInline @exclusivity(unchecked) package final var state: State = .new
    @exclusivity(unchecked) package final var flags: Flags = []

    private static let versionInBox = UInt32.max

    private final class Box {
        var snapshot: ContiguousArray<PropertyValue>?
        var version: Int64 = 0
        /// The member indexes of loaded to-many slots, by slot index: only of
        /// slots whose members were added or removed one at a time (see
        /// ``ManagedObject/withToManyMembers(at:_:)``).
        var toManyMemberIndexes: [Int: ToManyMemberIndex] = [:]
        /// See ``ManagedObject/prefetchedObjects``.
        var prefetchedObjects: [Int: [ManagedObject]] = [:]
        /// Made by the first typed read in an observable context (see
        /// ``ManagedObject/observationRegistrar``); kept for the object's life,
        /// since trackings registered with it must hear of later changes.
        var observation: ObjectObservation?
    }

    /// The box, made now if the object has none.
    private var madeBox: Box {
        if let box { return box }
        let made = Box()
        box = made
        return made
    }

    /// Lets the box go when it holds nothing any more.
    private func unboxIfPossible() {
        guard let box, box.snapshot == nil || snapshotIsSlots, box.toManyMemberIndexes.isEmpty,
              box.prefetchedObjects.isEmpty, compactVersion != Self.versionInBox, box.observation == nil else { return }
        self.box = nil
    }

    /// The object's observation registrar; nil until a typed read in an
    /// observable context made one (see ``ManagedObject/noteObservedRead(at:)``).
    package final var observationRegistrar: ObservationRegistrar? { box?.observation?.registrar }

    /// Whether a registrar was made: a load and a compare, with no copy of
    /// the registrar (a type of a resilient library, copied through its
    /// value witnesses: a retain and a release).
    package final var isObserved: Bool { box?.observation != nil }

    /// The registrar, made now if the object has none.
    package final var madeObservationRegistrar: ObservationRegistrar {
        if let observation = box?.observation { return observation.registrar }
        let made = ObjectObservation()
        madeBox.observation = made
        return made.registrar
    }

    /// Replaces the values of an observed object, calling `willSet` before and
    /// `didSet` after for exactly the slots whose values differ. Loading a
    /// fault's values, or dropping them to turn into one, changes no value
    /// and tells no one.
    private func replaceValuesTellingObservers(with values: ContiguousArray<PropertyValue>, _ registrar: ObservationRegistrar) {
        guard !storedSlots.isEmpty, storedSlots.count == values.count else {
            storedSlots = values
            return
        }
        let changed = values.indices.filter { storedSlots[$0] != values[$0] }
        for index in changed { registrar.willSet(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index)) }
        storedSlots = values
        for index in changed { registrar.didSet(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index)) }
    }

    /// The destinations a fetch prefetched for this object's relationships
    /// (`relationshipKeyPathsForPrefetching`), kept alive while the object holds
    /// its values, as a fired relationship retains its objects in Core Data.
    package final var prefetchedObjects: [Int: [ManagedObject]] {
        get { box?.prefetchedObjects ?? [:] }
        set {
            if let box {
                box.prefetchedObjects = newValue
                if newValue.isEmpty { unboxIfPossible() }
            } else if !newValue.isEmpty {
                madeBox.prefetchedObjects = newValue
            }
        }
    }

    @usableFromInline package enum State {
        /// Created, with defaults not yet written into `slots`.
        case new
        /// Only the ID is known; values are loaded on first access.
        case fault
        /// `slots` hold the values.
        case loaded
    }

    package struct Flags: OptionSet {
        package let rawValue: UInt16
        package init(rawValue: UInt16) { self.rawValue = rawValue }
        package static let inserted = Flags(rawValue: 1 << 0)
        package static let updated = Flags(rawValue: 1 << 1)
        package static let deleted = Flags(rawValue: 1 << 2)
        /// Counted among the context's pending inserts (see `PendingChanges`).
        package static let pendingInsert = Flags(rawValue: 1 << 3)
        /// Its row was gone when the fault fired (`shouldDeleteInaccessibleFaults`).
        package static let inaccessible = Flags(rawValue: 1 << 4)
        /// `willSave()` ran during the save in progress.
        package static let willSaveCalled = Flags(rawValue: 1 << 5)
        /// In the context's list of objects the next save inserts, updates or
        /// deletes (see `ChangedObjects`): set and cleared by the list only.
        package static let insertedChange = Flags(rawValue: 1 << 6)
        package static let updatedChange = Flags(rawValue: 1 << 7)
        package static let deletedChange = Flags(rawValue: 1 << 8)
        /// Has an entry in that list (marked or not: see `ChangedObjects`).
        package static let insertedListed = Flags(rawValue: 1 << 9)
        package static let updatedListed = Flags(rawValue: 1 << 10)
        package static let deletedListed = Flags(rawValue: 1 << 11)
        /// The flags the change lists own: clearing an object's state keeps
        /// them (`flags.formIntersection(.changeLists)`), and the lists clear
        /// them when they let the object go.
        package static let changeLists: Flags = [.insertedChange, .updatedChange, .deletedChange,
                                                 .insertedListed, .updatedListed, .deletedListed]
    }

    /// Creates an object of `entity`, and inserts it into `context` if one is given.
    ///
    /// Subclasses that override this initializer must call it; Core Data's
    /// contexts create faults through it too, with a nil context.
    public required init(entity: EntityDescription, insertInto context: ManagedObjectContext?) {
        entity.prepareLayout()
        self.storedID = .temporary(for: entity)
        if let context {
            context.insert(self)
        }
    }

    /// What the class declares of its entity beyond its `@Managed`
    /// properties, for a model derived from its classes
    /// (``ManagedObjectModel/init(classes:)``): name, abstract, uniqueness
    /// constraints, indexes. The default declares nothing.
    ///
    /// ```swift
    /// override class var entityDeclaration: EntityDeclaration {
    ///     EntityDeclaration(uniquenessConstraints: [[\Company.symbol]], indexes: [[\Company.name]])
    /// }
    /// ```
    open class var entityDeclaration: EntityDeclaration { EntityDeclaration() }

    /// Creates an object of the entity bound to this class, inserted into `context`.
    ///
    /// The entity is the one in the context's model whose `managedObjectClass` is
    /// this class. A class bound to no entity, or to several, is a programmer
    /// error, as in Core Data; use ``init(entity:insertInto:)`` to choose.
    public convenience init(context: ManagedObjectContext) {
        guard let entity = context.entity(forObjectsOf: Self.self) else {
            preconditionFailure("\(Self.self) is bound to no single entity of the context's model; set the entity's managedObjectClass or use init(entity:insertInto:)")
        }
        self.init(entity: entity, insertInto: context)
    }

    /// Takes a fetched row as the object's values and snapshot at once. The
    /// row's array moves in (the caller's is left empty): a large fetch's rows
    /// are out of the processor's caches by the time objects are made, and a
    /// copy would touch each one's memory just to count a reference.
    package final func takeFetchedValues(_ values: inout ContiguousArray<PropertyValue>) {
        snapshotIsSlots = true
        if let observation = box?.observation {
            replaceValuesTellingObservers(with: values, observation.registrar)
            values = []
        } else {
            storedSlots = []
            swap(&storedSlots, &values)
        }
        if let box {
            box.snapshot = nil
            box.toManyMemberIndexes = [:]
            unboxIfPossible()
        }
    }

    /// The values become the snapshot, without a copy: after a save wrote them.
    package final func takeValuesAsSnapshot() {
        snapshotIsSlots = true
        if let box {
            box.snapshot = nil
            unboxIfPossible()
        }
    }

    @inline(__always)
    private func keepSnapshot() {
        guard snapshotIsSlots else { return }
        madeBox.snapshot = storedSlots
        snapshotIsSlots = false
    }

    @inline(__always)
    private func forgetToManyMemberIndexes() {
        if let box, !box.toManyMemberIndexes.isEmpty { box.toManyMemberIndexes = [:] }
    }

    // MARK: - Slot writes

    /// Writes one slot, forgetting the member index of that slot only.
    ///
    /// The value is taken, not borrowed: the slot keeps the caller's value
    /// instead of a copy of it (a copy and a destroy a write, ~40 instructions).
    package final func replaceSlot(_ value: consuming PropertyValue, at index: Int) {
        keepSnapshot()
        if let box {
            if !box.toManyMemberIndexes.isEmpty { box.toManyMemberIndexes[index] = nil }
            if let registrar = box.observation?.registrar, storedSlots[index] != value {
                let keyPath = ObservedSlotKeyPaths.keyPath(at: index)
                registrar.willSet(self, keyPath: keyPath)
                storedSlots[index] = consume value
                registrar.didSet(self, keyPath: keyPath)
                return
            }
        }
        storedSlots[index] = consume value
    }

    /// Changes the members of the loaded to-many in slot `index` in place:
    /// `body` gets the slot's list of IDs, uniquely referenced so that it
    /// changes without a copy, and its ``ToManyMemberIndex`` (built with one
    /// pass over the list if the slot has none yet). What `body` leaves in
    /// them is the slot's value and index afterwards.
    ///
    /// The caller records the change (this writes no change tracking).
    ///
    /// - Returns: `body`'s result; nil, with nothing called or changed, if the
    ///   slot holds no list or its list holds an ID twice.
    package final func withToManyMembers<Result>(at index: Int,
                                           _ body: (inout [ObjectID], inout ToManyMemberIndex) -> Result) -> Result? {
        guard state == .loaded, case .objects = storedSlots[index] else { return nil }
        keepSnapshot()
        // Out of the slot, so that the slot does not keep a second reference to it.
        var taken = PropertyValue.null
        swap(&taken, &storedSlots[index])
        var ids: [ObjectID] = []
        if case .objects(let list) = taken { ids = list }
        taken = .null
        var memberIndex: ToManyMemberIndex
        if let known = box?.toManyMemberIndexes.removeValue(forKey: index) {
            memberIndex = known
        } else if let built = ToManyMemberIndex(ids) {
            memberIndex = built
            countToManyMemberWork(ids.count)
        } else {
            storedSlots[index] = .objects(ids)
            return nil
        }
        #if DEBUG
        // Counts the members copied when the list is reallocated: by growth
        // (amortized O(1) per append) or because something else still held it.
        let before = ids.withUnsafeBufferPointer { $0.baseAddress }
        #endif
        // Observers hear of the change before it is made, as of any other;
        // whether the members really change is known only afterwards.
        let registrar = box?.observation?.registrar
        registrar?.willSet(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index))
        let result = body(&ids, &memberIndex)
        #if DEBUG
        if ids.withUnsafeBufferPointer({ $0.baseAddress }) != before { countToManyMemberWork(ids.count) }
        #endif
        storedSlots[index] = .objects(ids)
        madeBox.toManyMemberIndexes[index] = memberIndex
        registrar?.didSet(self, keyPath: ObservedSlotKeyPaths.keyPath(at: index))
        return result
    }

    /// Adds `count` to the context's `toManyMemberWork`, which tests read, in
    /// debug builds only: in a release build this is empty, and the to-many
    /// paths do no work for the tests.
    @inline(__always)
    final func countToManyMemberWork(_ count: @autoclosure () -> Int) {
        #if DEBUG
        managedObjectContext?.toManyMemberWork += count()
        #endif
    }

    // MARK: - State

    /// Whether the object was inserted and not saved yet.
    public final var isInserted: Bool { flags.contains(.inserted) }
    /// Whether the object has unsaved changes to its values.
    public final var isUpdated: Bool { flags.contains(.updated) }
    /// Whether the object will be deleted at the next save.
    public final var isDeleted: Bool { flags.contains(.deleted) }
    /// Whether the object's values are not loaded yet.
    public final var isFault: Bool { state == .fault }
    /// Whether the object was inserted, updated or deleted and not saved yet.
    public final var hasChanges: Bool { !flags.isDisjoint(with: [.inserted, .updated, .deleted]) }

    /// The values that differ from the last saved (or fetched) ones, by key.
    ///
    /// For an inserted object: every value that differs from the property's default.
    /// A transformable value whose stored archive cannot be unarchived (see
    /// ``TransformedValueError``) is given as its bytes, since this cannot throw.
    public func changedValues() -> [String: Any] {
        guard state == .loaded else { return [:] }
        var result: [String: Any] = [:]
        for (index, property) in entity.slotProperties.enumerated() {
            let baseline = snapshot?[index] ?? Self.initialValue(of: property)
            if slots[index] != baseline {
                // A changed value is in memory: nothing to read; only an archive
                // that does not unarchive can fail, and its bytes are the value.
                result[property.name] = (try? anyValue(slots[index], for: property))
                    ?? (property as? AttributeDescription).flatMap { slots[index].anyValue(for: $0.type) }
            }
        }
        return result
    }

    /// The last saved (or fetched) values of `keys`, or of every property for nil.
    ///
    /// An inserted object has no committed values: the result is empty.
    ///
    /// - Throws: ``FaultFulfillmentError`` when the values cannot be read.
    public func committedValues(forKeys keys: [String]?) throws -> [String: Any] {
        try loadValues()
        guard let snapshot else { return [:] }
        var result: [String: Any] = [:]
        for property in entity.slotProperties where keys?.contains(property.name) ?? true {
            result[property.name] = try anyValue(snapshot[property.index], for: property) ?? Optional<Any>.none as Any
        }
        return result
    }

    // MARK: - Lifecycle hooks

    /// Called once, when the object is first inserted into a context.
    open func awakeFromInsert() {}
    /// Called when a fault's values have been loaded from the store.
    open func awakeFromFetch() {}
    /// Called before the object is saved; changes made here are saved too.
    open func willSave() {}
    /// Called after the object was saved.
    open func didSave() {}
    /// Called when the object is deleted, before its relationships are torn down.
    open func prepareForDeletion() {}
    /// Called when the object turns back into a fault (refresh, reset).
    open func willTurnIntoFault() {}
    /// Called after the object turned back into a fault.
    open func didTurnIntoFault() {}
    /// Checks the object before an inserted object is saved. The default checks the model's rules.
    open func validateForInsert() throws { try validateValues() }
    /// Checks the object before an updated object is saved. The default checks the model's rules.
    open func validateForUpdate() throws { try validateValues() }
    /// Checks the object before a deleted object is saved. The default checks `.deny` rules.
    open func validateForDelete() throws { try validateDeleteRules() }

    // MARK: - Faulting

    /// Loads the object's values now, if it is a fault (Core Data fires a fault
    /// on first access; this is the way to fire one and learn why it failed).
    ///
    /// An object whose row is gone becomes a deleted object with empty values
    /// (see ``ManagedObjectContext/shouldDeleteInaccessibleFaults``): check
    /// ``isDeleted``. Any other failure leaves it a fault, and a later access
    /// tries again.
    ///
    /// - Throws: ``FaultFulfillmentError`` when the store cannot be read.
    public final func loadValues() throws {
        switch state {
        case .loaded: return
        case .new: materializeDefaults()
        case .fault:
            assertOnContextQueue()
            if let context = managedObjectContext {
                try context.fulfillFault(self)
            } else {
                // A fault whose context is gone can never load: it reads as empty.
                materializeDefaults()
            }
        }
    }

    /// ``loadValues()`` for the paths that cannot throw. On failure the
    /// object stays a fault; the context has recorded and posted the error
    /// (see ``FaultFulfillmentError``), so there is nothing more to do here.
    package final func fireFault() {
        do {
            try loadValues()
        } catch {
            return
        }
    }

    package final func materializeDefaults() {
        // A copy the object owns, made by a loop specialized for the values:
        // sharing the entity's array made the first write copy it through
        // the runtime's generic array copy (~640 instructions an insert).
        // (`ContiguousArray(unsafeUninitializedCapacity:)` is no better: its
        // allocation is an unspecialized call, ~690 instructions.)
        let initial = entity.initialSlots
        var values = ContiguousArray<PropertyValue>()
        values.reserveCapacity(initial.count)
        for value in initial { values.append(value) }
        if storedSlots.isEmpty, !snapshotIsSlots, box == nil {
            // A new object (the common case): no snapshot to keep, no member
            // index to forget and no observer to tell, which `slots`' setter checks.
            storedSlots = values
        } else {
            slots = values
        }
        state = .loaded
    }

    /// What a new object holds for `property`.
    package static func initialValue(of property: PropertyDescription) -> PropertyValue {
        switch property {
        case let attribute as AttributeDescription: attribute.defaultValue
        case let relationship as RelationshipDescription: relationship.isToMany ? .objects([]) : .null
        default: .null
        }
    }

    /// Turns the object back into a fault, dropping its values (not its pending changes: callers decide).
    package final func turnIntoFault() {
        // Unsaved changes are dropped: observers of the changed slots hear
        // that they return to the snapshot's values.
        if isObserved, !snapshotIsSlots, let snapshot {
            tellingObservers(ofValuesChangingTo: snapshot) { turnIntoFaultToldAlready() }
        } else {
            turnIntoFaultToldAlready()
        }
    }

    /// ``turnIntoFault()`` for callers that have told the object's observers
    /// themselves, from a newer row (see ``tellingObservers(ofRow:_:)``).
    package final func turnIntoFaultToldAlready() {
        willTurnIntoFault()
        // The snapshot first: emptied while it still shared the values, the
        // values would first be copied into it (see `keepSnapshot()`).
        snapshot = nil
        slots = []
        prefetchedObjects = [:]
        unboxIfPossible()
        state = .fault
        didTurnIntoFault()
    }
}

// A ManagedObject lives on its context's queue; pass its objectID instead.
@available(*, unavailable)
extension ManagedObject: Sendable {}

extension ManagedObject: CustomStringConvertible {
    public var description: String {
        "<\(type(of: self)): \(entity.name) \(objectID)\(isFault ? " (fault)" : "")>"
    }
}
