/// The objects of a context with one kind of unsaved change — inserted,
/// updated or deleted — as a list, and a mark on each object that says it
/// is in it.
///
/// Not a dictionary by ID: adding an object is a bit and an append, with no
/// hash of its ID, and a save that gives objects permanent IDs has nothing to
/// file again. Taking an object out clears its mark and leaves its entry,
/// which reads skip; the list is compacted when most of it is such entries.
/// A second flag says an object has an entry, so one taken out and added
/// again is marked again rather than listed twice.
///
/// The flags are the list's own (``ManagedObject/Flags/insertedChange`` and
/// its siblings), never set or cleared by anything else: what a context does
/// to an object's other flags cannot make the list and the marks disagree.
struct ChangedObjects {
    private let mark: ManagedObject.Flags
    private let listed: ManagedObject.Flags
    /// The marked objects, and objects taken out since the last compaction;
    /// each object once.
    private var list: [ManagedObject] = []
    /// How many objects are marked.
    private(set) var count = 0

    init(marking mark: ManagedObject.Flags, listing listed: ManagedObject.Flags) {
        self.mark = mark
        self.listed = listed
    }

    var isEmpty: Bool { count == 0 }

    /// The objects, in the order they were added.
    var objects: [ManagedObject] {
        count == list.count ? list : list.filter { $0.flags.contains(mark) }
    }

    func contains(_ object: ManagedObject) -> Bool {
        object.flags.contains(mark)
    }

    mutating func insert(_ object: ManagedObject) {
        if object.flags.contains(mark) { return }
        object.flags.insert(mark)
        count += 1
        if object.flags.contains(listed) { return }
        object.flags.insert(listed)
        list.append(object)
    }

    mutating func remove(_ object: ManagedObject) {
        guard object.flags.contains(mark) else { return }
        object.flags.remove(mark)
        count -= 1
        if count == 0 {
            removeAll()
        } else if list.count > 2 * count + 64 {
            list.removeAll { object in
                if object.flags.contains(mark) { return false }
                object.flags.remove(listed)
                return true
            }
        }
    }

    /// Takes out the objects for which `shouldRemove` returns true.
    mutating func remove(where shouldRemove: (ManagedObject) -> Bool) {
        for object in objects where shouldRemove(object) { remove(object) }
    }

    /// Takes every object out.
    mutating func removeAll() {
        for object in list { object.flags.subtract([mark, listed]) }
        list = []
        count = 0
    }

    mutating func reserveCapacity(_ capacity: Int) {
        list.reserveCapacity(capacity)
    }
}
