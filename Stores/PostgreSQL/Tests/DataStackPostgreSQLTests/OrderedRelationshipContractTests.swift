import DataStackPostgreSQL
import Foundation
import ObjectGraph
import Testing

/// Ordered to-many relationships, run against the SQLite store and the
/// PostgreSQL store alike. Core Data keeps their order as `Z_FOK_` ranks: in
/// the destination's `Z_FOK_<INVERSE>` column for an ordered one-to-many, in
/// the join table for an ordered many-to-many. Every read-back goes through a
/// new coordinator on the same location, so the order comes from the store.
@Suite("Ordered relationship contract", .serialized)
struct OrderedRelationshipContractTests {
    /// Playlist.tracks (ordered, cascade) ↔ Track.playlist (to-one); Album.songs
    /// (ordered) ↔ Song.albums (unordered); Course.students ↔ Student.courses,
    /// ordered on both sides. Entity numbers follow the names: Album 1, Course 2,
    /// Playlist 3, Song 4, Student 5, Track 6, so the join tables are named from
    /// Album.songs and Course.students (the sides that write their rows).
    private static func makeModel() -> ManagedObjectModel {
        func name() -> AttributeDescription { AttributeDescription(name: "name", type: .string, isOptional: false) }
        let playlist = EntityDescription(name: "Playlist", properties: [
            name(),
            RelationshipDescription(name: "tracks", destination: "Track", inverse: "playlist", isToMany: true, isOrdered: true,
                                    deleteRule: .cascade),
        ])
        let track = EntityDescription(name: "Track", properties: [
            name(),
            AttributeDescription(name: "seconds", type: .integer32, isOptional: false, defaultValue: .integer(0)),
            RelationshipDescription(name: "playlist", destination: "Playlist", inverse: "tracks", deleteRule: .nullify),
        ])
        let album = EntityDescription(name: "Album", properties: [
            name(),
            RelationshipDescription(name: "songs", destination: "Song", inverse: "albums", isToMany: true, isOrdered: true,
                                    deleteRule: .nullify),
        ])
        let song = EntityDescription(name: "Song", properties: [
            name(),
            RelationshipDescription(name: "albums", destination: "Album", inverse: "songs", isToMany: true, deleteRule: .nullify),
        ])
        let course = EntityDescription(name: "Course", properties: [
            name(),
            AttributeDescription(name: "credits", type: .integer32, isOptional: false, defaultValue: .integer(0)),
            RelationshipDescription(name: "students", destination: "Student", inverse: "courses", isToMany: true, isOrdered: true,
                                    deleteRule: .nullify),
        ])
        let student = EntityDescription(name: "Student", properties: [
            name(),
            RelationshipDescription(name: "courses", destination: "Course", inverse: "students", isToMany: true, isOrdered: true,
                                    deleteRule: .nullify),
        ])
        return ManagedObjectModel(entities: [playlist, track, album, song, course, student])
    }

    /// A store of one kind at a new location, with the helpers the tests share.
    private struct Store {
        let kind: StoreKind
        let model: ManagedObjectModel
        let location: URL

        init(_ kind: StoreKind) throws {
            self.kind = kind
            model = OrderedRelationshipContractTests.makeModel()
            location = try kind.makeLocation()
        }

        /// A context on a new coordinator: nothing it reads was cached before.
        func context() throws -> ManagedObjectContext {
            ManagedObjectContext(concurrencyType: .privateQueue, coordinator: try kind.coordinator(model, at: location))
        }

        /// Runs `body` in a new context and saves; returns what `body` returns.
        @discardableResult
        func change<T>(_ body: (ManagedObjectContext) throws -> T) throws -> T {
            let context = try context()
            return try context.performAndWait {
                let result = try body(context)
                try context.save()
                return result
            }
        }

        /// Runs `body` in a new context, without saving.
        func read<T>(_ body: (ManagedObjectContext) throws -> T) throws -> T {
            let context = try context()
            return try context.performAndWait { try body(context) }
        }

        /// Every object of `entity`, by name, with the names of what `key` relates it to: in
        /// order for an ordered to-many, sorted for an unordered one, none or one for a to-one.
        func contents(_ entity: String, _ key: String) throws -> [String: [String]] {
            try read { context in
                var result: [String: [String]] = [:]
                for object in try context.fetch(FetchRequest<ManagedObject>(entityName: entity)) {
                    result[try Store.name(of: object)] = try Store.related(object, key)
                }
                return result
            }
        }

        /// An integer attribute of every object of `entity`, by name.
        func integers(_ entity: String, _ key: String) throws -> [String: Int] {
            try read { context in
                var result: [String: Int] = [:]
                for object in try context.fetch(FetchRequest<ManagedObject>(entityName: entity)) {
                    result[try Store.name(of: object)] = try #require(try object.value(forKey: key) as? Int, "\(entity).\(key)")
                }
                return result
            }
        }

        /// Expects ``contents(_:_:)`` to be `expected`, showing what was read when it is not.
        func expectContents(_ entity: String, _ key: String, _ expected: [String: [String]], _ comment: Comment? = nil,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
            let read = try contents(entity, key)
            #expect(read == expected, comment, sourceLocation: sourceLocation)
        }

        /// Expects ``integers(_:_:)`` to be `expected`.
        func expectIntegers(_ entity: String, _ key: String, _ expected: [String: Int], _ comment: Comment? = nil,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
            let read = try integers(entity, key)
            #expect(read == expected, comment, sourceLocation: sourceLocation)
        }

        /// A new object of `entity` named `name`.
        func insert(_ entity: String, _ name: String, into context: ManagedObjectContext) throws -> ManagedObject {
            let object = ManagedObject(entity: try #require(model.entitiesByName[entity], "entity \(entity)"), insertInto: context)
            try object.setValue(name, forKey: "name")
            return object
        }

        /// The one object of `entity` named `name`.
        static func object(_ entity: String, _ name: String, in context: ManagedObjectContext) throws -> ManagedObject {
            let request = FetchRequest<ManagedObject>(entityName: entity, predicate: try FetchPredicate(format: "name == %@", name))
            let found = try context.fetch(request)
            #expect(found.count == 1, "one \(entity) named \(name)")
            return try #require(found.first, "\(entity) \(name)")
        }

        /// The objects of `entity` named `names`, in that order.
        static func objects(_ entity: String, _ names: [String], in context: ManagedObjectContext) throws -> [ManagedObject] {
            try names.map { try object(entity, $0, in: context) }
        }

        static func name(of object: ManagedObject) throws -> String {
            try #require(try object.value(forKey: "name") as? String, "\(object.entity.name).name")
        }

        /// The value of an ordered to-many: an array, in its order.
        static func ordered(_ object: ManagedObject, _ key: String) throws -> [ManagedObject] {
            let value = try object.value(forKey: key)
            let type = value.map { "\(Swift.type(of: $0))" } ?? "nil"
            return try #require(value as? [ManagedObject], "\(object.entity.name).\(key) is ordered: an array, not \(type)")
        }

        /// The names of what `key` relates `object` to (see ``contents(_:_:)``).
        static func related(_ object: ManagedObject, _ key: String) throws -> [String] {
            let relationship = try #require(object.entity.relationshipsByName[key], "\(object.entity.name).\(key)")
            if relationship.isOrdered { return try ordered(object, key).map(name(of:)) }
            let value = try object.value(forKey: key)
            if relationship.isToMany {
                let members = try #require(value as? Set<ManagedObject>, "\(object.entity.name).\(key) is unordered: a set")
                return try members.map(name(of:)).sorted()
            }
            return try (value as? ManagedObject).map { [try name(of: $0)] } ?? []
        }
    }

    /// New objects of `entity` named `names`, saved one at a time so that their
    /// keys follow `names`: a save assigns the keys of the objects it inserts in
    /// no set order, and an order that a test expects must differ from key order,
    /// which is what a store falls back on for members without a rank.
    private func insertInKeyOrder(_ store: Store, _ entity: String, _ names: [String],
                                  into context: ManagedObjectContext) throws -> [ManagedObject] {
        try names.map { name in
            let object = try store.insert(entity, name, into: context)
            try context.save()
            return object
        }
    }

    /// Courses c1, c2, c3 and students ann, bob, cat (keys in that order), with
    /// both sides ordered otherwise than by key: the student sides set first
    /// (each appending to the course sides), then the course sides reordered.
    private func seedCourses(_ store: Store) throws {
        try store.change { context in
            let courses = try insertInKeyOrder(store, "Course", ["c1", "c2", "c3"], into: context)
            let students = try insertInKeyOrder(store, "Student", ["ann", "bob", "cat"], into: context)
            let (ann, bob, cat) = (students[0], students[1], students[2])
            try ann.setValue([courses[2], courses[0]], forKey: "courses")
            try bob.setValue([courses[1], courses[0], courses[2]], forKey: "courses")
            try cat.setValue([courses[1], courses[0]], forKey: "courses")
            try courses[0].setValue([cat, ann, bob], forKey: "students")
            try courses[1].setValue([cat, bob], forKey: "students")
            try courses[2].setValue([bob, ann], forKey: "students")
        }
    }

    private static let seededCourses = ["c1": ["cat", "ann", "bob"], "c2": ["cat", "bob"], "c3": ["bob", "ann"]]
    private static let seededStudents = ["ann": ["c3", "c1"], "bob": ["c2", "c1", "c3"], "cat": ["c2", "c1"]]

    /// Albums A and B sharing songs s1…s5 (keys in that order) in other orders.
    private func seedAlbums(_ store: Store) throws {
        try store.change { context in
            let songs = try insertInKeyOrder(store, "Song", ["s1", "s2", "s3", "s4", "s5"], into: context)
            let albums = try insertInKeyOrder(store, "Album", ["A", "B"], into: context)
            try albums[0].setValue([songs[2], songs[0], songs[3], songs[1]], forKey: "songs")
            try albums[1].setValue([songs[1], songs[4], songs[2]], forKey: "songs")
        }
    }

    /// Tracks named `tracks` (keys in that order, seconds from 100 up) and
    /// playlists holding them in the orders given.
    private func seedPlaylists(_ store: Store, tracks: [String], playlists: [(String, [String])]) throws {
        try store.change { context in
            var byName: [String: ManagedObject] = [:]
            for (offset, track) in try insertInKeyOrder(store, "Track", tracks, into: context).enumerated() {
                try track.setValue(100 + offset, forKey: "seconds")
                byName[tracks[offset]] = track
            }
            for (name, members) in playlists {
                let playlist = try store.insert("Playlist", name, into: context)
                try playlist.setValue(try members.map { try #require(byName[$0], "track \($0)") }, forKey: "tracks")
            }
        }
    }

    // MARK: - Tests

    @Test("an ordered one-to-many keeps its order through insert, move, swap, remove and insert in the middle",
          arguments: StoreKind.allCases)
    func orderedOneToMany(_ kind: StoreKind) throws {
        let store = try Store(kind)
        try seedPlaylists(store, tracks: ["t1", "t2", "t3", "t4", "t5", "o1", "o2"],
                          playlists: [("mix", ["t3", "t1", "t5", "t2", "t4"]), ("other", ["o2", "o1"])])
        try store.expectContents("Playlist", "tracks", ["mix": ["t3", "t1", "t5", "t2", "t4"], "other": ["o2", "o1"]])
        try store.expectContents("Track", "playlist", ["t1": ["mix"], "t2": ["mix"], "t3": ["mix"], "t4": ["mix"],
                                                       "t5": ["mix"], "o1": ["other"], "o2": ["other"]])
        try store.expectIntegers("Track", "seconds", ["t1": 100, "t2": 101, "t3": 102, "t4": 103, "t5": 104, "o1": 105, "o2": 106])

        // Move the last to the front, then swap the second and the fourth.
        let reordered = try store.change { context in
            let mix = try Store.object("Playlist", "mix", in: context)
            var tracks = try Store.ordered(mix, "tracks")             // t3 t1 t5 t2 t4
            tracks.insert(tracks.removeLast(), at: 0)                 // t4 t3 t1 t5 t2
            tracks.swapAt(1, 3)                                       // t4 t5 t1 t3 t2
            try mix.setValue(tracks, forKey: "tracks")
            return try Store.related(mix, "tracks")
        }
        #expect(reordered == ["t4", "t5", "t1", "t3", "t2"])
        try store.expectContents("Playlist", "tracks", ["mix": ["t4", "t5", "t1", "t3", "t2"], "other": ["o2", "o1"]])

        // Remove one, insert a new one in the middle.
        let (edited, removedOwner, insertedOwner) = try store.change { context in
            let mix = try Store.object("Playlist", "mix", in: context)
            var tracks = try Store.ordered(mix, "tracks")
            let removed = tracks.remove(at: 2)                        // t1: t4 t5 t3 t2
            let t6 = try store.insert("Track", "t6", into: context)
            try t6.setValue(200, forKey: "seconds")
            tracks.insert(t6, at: 2)                                  // t4 t5 t6 t3 t2
            try mix.setValue(tracks, forKey: "tracks")
            return (try Store.related(mix, "tracks"), try Store.related(removed, "playlist"), try Store.related(t6, "playlist"))
        }
        #expect(edited == ["t4", "t5", "t6", "t3", "t2"])
        #expect(removedOwner.isEmpty, "removing a track from the list clears its playlist")
        #expect(insertedOwner == ["mix"], "inserting a track into the list sets its playlist")
        try store.expectContents("Playlist", "tracks", ["mix": ["t4", "t5", "t6", "t3", "t2"], "other": ["o2", "o1"]])
        try store.expectContents("Track", "playlist", ["t1": [], "t2": ["mix"], "t3": ["mix"], "t4": ["mix"], "t5": ["mix"],
                                                       "t6": ["mix"], "o1": ["other"], "o2": ["other"]])

        // A change of a track's own attribute leaves the order alone.
        try store.change { context in
            try Store.object("Track", "t3", in: context).setValue(333, forKey: "seconds")
        }
        try store.expectContents("Playlist", "tracks", ["mix": ["t4", "t5", "t6", "t3", "t2"], "other": ["o2", "o1"]])
        try store.expectIntegers("Track", "seconds", ["t1": 100, "t2": 101, "t3": 333, "t4": 103, "t5": 104, "t6": 200,
                                                      "o1": 105, "o2": 106])
    }

    @Test("an ordered many-to-many keeps each owner's order; its unordered inverse holds the right set",
          arguments: StoreKind.allCases)
    func orderedManyToMany(_ kind: StoreKind) throws {
        let store = try Store(kind)
        try seedAlbums(store)
        try store.expectContents("Album", "songs", ["A": ["s3", "s1", "s4", "s2"], "B": ["s2", "s5", "s3"]])
        try store.expectContents("Song", "albums", ["s1": ["A"], "s2": ["A", "B"], "s3": ["A", "B"], "s4": ["A"], "s5": ["B"]])

        // Reorder one album: the other keeps its order.
        try store.change { context in
            let a = try Store.object("Album", "A", in: context)
            try a.setValue(Array(try Store.ordered(a, "songs").reversed()), forKey: "songs")
        }
        try store.expectContents("Album", "songs", ["A": ["s2", "s4", "s1", "s3"], "B": ["s2", "s5", "s3"]])
        try store.expectContents("Song", "albums", ["s1": ["A"], "s2": ["A", "B"], "s3": ["A", "B"], "s4": ["A"], "s5": ["B"]])

        // Membership changed from the unordered side: a joining song goes to the end, a leaving one leaves a gap closed.
        let inContext = try store.change { context in
            let (a, b) = (try Store.object("Album", "A", in: context), try Store.object("Album", "B", in: context))
            try Store.object("Song", "s5", in: context).setValue(Set([a, b]), forKey: "albums")
            try Store.object("Song", "s3", in: context).setValue(Set([a]), forKey: "albums")
            return [try Store.related(a, "songs"), try Store.related(b, "songs")]
        }
        #expect(inContext == [["s2", "s4", "s1", "s3", "s5"], ["s2", "s5"]])
        try store.expectContents("Album", "songs", ["A": ["s2", "s4", "s1", "s3", "s5"], "B": ["s2", "s5"]])
        try store.expectContents("Song", "albums", ["s1": ["A"], "s2": ["A", "B"], "s3": ["A"], "s4": ["A"], "s5": ["A", "B"]])
    }

    @Test("a many-to-many ordered on both sides keeps both sides' ranks through changes on either side",
          arguments: StoreKind.allCases)
    func orderedOnBothSides(_ kind: StoreKind) throws {
        let store = try Store(kind)
        try seedCourses(store)
        try store.expectContents("Course", "students", Self.seededCourses)
        try store.expectContents("Student", "courses", Self.seededStudents)

        // The side that names the join table reorders, and only it.
        try store.change { context in
            try Store.object("Course", "c1", in: context)
                .setValue(try Store.objects("Student", ["bob", "cat", "ann"], in: context), forKey: "students")
        }
        try store.expectContents("Course", "students", ["c1": ["bob", "cat", "ann"], "c2": ["cat", "bob"], "c3": ["bob", "ann"]])
        try store.expectContents("Student", "courses", Self.seededStudents,
                                 "reordering a course's students leaves each student's courses in order")

        // The other side reorders, and only it.
        try store.change { context in
            try Store.object("Student", "bob", in: context)
                .setValue(try Store.objects("Course", ["c3", "c2", "c1"], in: context), forKey: "courses")
        }
        try store.expectContents("Course", "students", ["c1": ["bob", "cat", "ann"], "c2": ["cat", "bob"], "c3": ["bob", "ann"]],
                                 "reordering a student's courses leaves each course's students in order")
        try store.expectContents("Student", "courses", ["ann": ["c3", "c1"], "bob": ["c3", "c2", "c1"], "cat": ["c2", "c1"]])

        // Both sides change membership and order in one save.
        let inContext = try store.change { context in
            let (c1, c2, c3) = (try Store.object("Course", "c1", in: context), try Store.object("Course", "c2", in: context),
                                try Store.object("Course", "c3", in: context))
            let (ann, bob, cat) = (try Store.object("Student", "ann", in: context), try Store.object("Student", "bob", in: context),
                                   try Store.object("Student", "cat", in: context))
            try cat.setValue([c1, c3], forKey: "courses")             // c2 loses cat; c3 gains it at the end
            let afterCat = [try Store.related(c2, "students"), try Store.related(c3, "students")]
            try c3.setValue([cat, bob, ann], forKey: "students")
            var annCourses = try Store.ordered(ann, "courses")
            annCourses.insert(c2, at: 0)                              // c2 gains ann at the end
            try ann.setValue(annCourses, forKey: "courses")
            return afterCat + [try Store.related(c2, "students"), try Store.related(ann, "courses"), try Store.related(bob, "courses")]
        }
        #expect(inContext == [["bob"], ["bob", "ann", "cat"], ["bob", "ann"], ["c2", "c3", "c1"], ["c3", "c2", "c1"]])
        let courses = ["c1": ["bob", "cat", "ann"], "c2": ["bob", "ann"], "c3": ["cat", "bob", "ann"]]
        let students = ["ann": ["c2", "c3", "c1"], "bob": ["c3", "c2", "c1"], "cat": ["c1", "c3"]]
        try store.expectContents("Course", "students", courses)
        try store.expectContents("Student", "courses", students)

        // An attribute change of a course whose students were read changes no order.
        try store.change { context in
            let c2 = try Store.object("Course", "c2", in: context)
            #expect(try Store.related(c2, "students") == ["bob", "ann"])
            try c2.setValue(5, forKey: "credits")
        }
        try store.expectIntegers("Course", "credits", ["c1": 0, "c2": 5, "c3": 0])
        try store.expectContents("Course", "students", courses)
        try store.expectContents("Student", "courses", students,
                                 "saving a course whose students were loaded leaves each student's courses in order")
    }

    @Test("a track moved to another playlist, by its to-one or by the lists, reads back in both lists' order",
          arguments: StoreKind.allCases)
    func movingBetweenPlaylists(_ kind: StoreKind) throws {
        let store = try Store(kind)
        try seedPlaylists(store, tracks: ["a", "b", "c", "d", "x", "y", "z"],
                          playlists: [("one", ["b", "d", "a", "c"]), ("two", ["z", "x", "y"])])

        // Through the to-one: the track leaves one list and goes to the end of the other.
        let byToOne = try store.change { context in
            let (one, two) = (try Store.object("Playlist", "one", in: context), try Store.object("Playlist", "two", in: context))
            try Store.object("Track", "b", in: context).setValue(two, forKey: "playlist")
            return [try Store.related(one, "tracks"), try Store.related(two, "tracks")]
        }
        #expect(byToOne == [["d", "a", "c"], ["z", "x", "y", "b"]])
        try store.expectContents("Playlist", "tracks", ["one": ["d", "a", "c"], "two": ["z", "x", "y", "b"]])
        let owners = try store.contents("Track", "playlist")
        #expect(owners["b"] == ["two"])

        // Through the lists: inserted in the middle of one, the other reordered in the same save.
        let byLists = try store.change { context in
            let (one, two) = (try Store.object("Playlist", "one", in: context), try Store.object("Playlist", "two", in: context))
            let y = try Store.object("Track", "y", in: context)
            var tracks = try Store.ordered(one, "tracks")
            tracks.insert(y, at: 1)                                   // d y a c
            try one.setValue(tracks, forKey: "tracks")
            let leftBehind = try Store.related(two, "tracks")
            try two.setValue(try Store.objects("Track", ["b", "x", "z"], in: context), forKey: "tracks")
            return [leftBehind, try Store.related(y, "playlist")]
        }
        #expect(byLists == [["z", "x", "b"], ["one"]], "inserting a track into one list takes it out of the other")
        try store.expectContents("Playlist", "tracks", ["one": ["d", "y", "a", "c"], "two": ["b", "x", "z"]])
        try store.expectContents("Track", "playlist", ["a": ["one"], "b": ["two"], "c": ["one"], "d": ["one"],
                                                       "x": ["two"], "y": ["one"], "z": ["two"]])
    }

    @Test("prefetching an ordered relationship loads it in order, with its rows", arguments: StoreKind.allCases)
    func prefetchingKeepsTheOrder(_ kind: StoreKind) throws {
        let store = try Store(kind)
        try seedPlaylists(store, tracks: ["a", "b", "c", "x", "y", "z"],
                          playlists: [("one", ["c", "a", "b"]), ("two", ["z", "x", "y"]), ("zero", [])])
        try seedAlbums(store)
        try seedCourses(store)

        /// Each fetched object's name with the names in `key`, prefetched; whether anything was left a fault.
        func prefetched(_ entity: String, _ key: String) throws -> (lists: [[String]], faults: [String]) {
            var request = FetchRequest<ManagedObject>(entityName: entity, predicate: nil, sortDescriptors: [FetchSort(key: "name")])
            request.relationshipKeyPathsForPrefetching = [key]
            return try store.read { context in
                var lists: [[String]] = []
                var faults: [String] = []
                for owner in try context.fetch(request) {
                    let name = try Store.name(of: owner)
                    if try owner.hasFault(forRelationshipNamed: key) { faults.append("\(name).\(key)") }
                    let members = try Store.ordered(owner, key)
                    faults += try members.filter(\.isFault).map { "\(name).\(key) → \(try Store.name(of: $0))" }
                    lists.append([name] + (try members.map(Store.name(of:))))
                }
                return (lists, faults)
            }
        }

        let playlists = try prefetched("Playlist", "tracks")
        #expect(playlists.lists == [["one", "c", "a", "b"], ["two", "z", "x", "y"], ["zero"]])
        #expect(playlists.faults.isEmpty, "the tracks came with the prefetch")
        let albums = try prefetched("Album", "songs")
        #expect(albums.lists == [["A", "s3", "s1", "s4", "s2"], ["B", "s2", "s5", "s3"]])
        #expect(albums.faults.isEmpty, "the songs came with the prefetch")
        let courses = try prefetched("Course", "students")
        #expect(courses.lists == [["c1", "cat", "ann", "bob"], ["c2", "cat", "bob"], ["c3", "bob", "ann"]])
        #expect(courses.faults.isEmpty, "the students came with the prefetch")
        let students = try prefetched("Student", "courses")
        #expect(students.lists == [["ann", "c3", "c1"], ["bob", "c2", "c1", "c3"], ["cat", "c2", "c1"]])
        #expect(students.faults.isEmpty, "the courses came with the prefetch")
    }

    @Test("deleting with cascade or nullify leaves the other owners' order intact", arguments: StoreKind.allCases)
    func deletesKeepTheOthersOrder(_ kind: StoreKind) throws {
        let store = try Store(kind)
        try seedPlaylists(store, tracks: ["a", "b", "c", "d", "e", "f", "g", "h"],
                          playlists: [("one", ["c", "a", "b"]), ("two", ["f", "d", "e"]), ("three", ["h", "g"])])
        try seedAlbums(store)
        try seedCourses(store)

        // A playlist (cascading to its tracks) and a song (nullified in its albums).
        try store.change { context in
            context.delete(try Store.object("Playlist", "two", in: context))
            context.delete(try Store.object("Song", "s3", in: context))
        }
        try store.expectContents("Playlist", "tracks", ["one": ["c", "a", "b"], "three": ["h", "g"]])
        try store.expectContents("Track", "playlist", ["a": ["one"], "b": ["one"], "c": ["one"], "g": ["three"], "h": ["three"]],
                                 "the cascade deleted the playlist's tracks")
        try store.expectContents("Album", "songs", ["A": ["s1", "s4", "s2"], "B": ["s2", "s5"]])
        try store.expectContents("Song", "albums", ["s1": ["A"], "s2": ["A", "B"], "s4": ["A"], "s5": ["B"]])

        // A track (nullified in its playlist), and a student and a course of the relationship ordered on both sides.
        try store.change { context in
            context.delete(try Store.object("Track", "a", in: context))
            context.delete(try Store.object("Student", "bob", in: context))
            context.delete(try Store.object("Course", "c3", in: context))
        }
        try store.expectContents("Playlist", "tracks", ["one": ["c", "b"], "three": ["h", "g"]])
        try store.expectContents("Course", "students", ["c1": ["cat", "ann"], "c2": ["cat"]])
        try store.expectContents("Student", "courses", ["ann": ["c1"], "cat": ["c2", "c1"]],
                                 "deleting a student and a course leaves the other students' courses in order")
    }
}
