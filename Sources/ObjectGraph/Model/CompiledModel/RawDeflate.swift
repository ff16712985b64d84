import CZlib
import Foundation

/// Raw DEFLATE data (RFC 1951, no zlib or gzip header) through the system's
/// zlib: the form in which Core Data keeps a store's model in
/// `Z_MODELCACHE.Z_CONTENT`.
package enum RawDeflate {
    /// A compressed stream that zlib cannot inflate, or that inflates past the limit.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// The inflated bytes of `data`.
    ///
    /// - Parameter limit: the most bytes the result may hold. A model cache
    ///   inflates to well under a megabyte (NoteStore's, the largest in the
    ///   fixtures, to 75 KB), so the default keeps a damaged or hostile blob
    ///   that claims gigabytes from exhausting memory.
    /// - Throws: ``Failure`` when the stream is damaged, ends early, or is longer than `limit`.
    package static func inflate(_ data: Data, limit: Int = 64 << 20) throws(Failure) -> Data {
        if data.isEmpty { throw Failure(description: "the compressed data is empty") }
        var stream = z_stream()
        let started = czlib_inflate_init_raw(&stream)
        guard started == Z_OK else {
            throw Failure(description: "zlib could not start inflating (\(String(cString: zError(started))))")
        }
        defer { inflateEnd(&stream) }

        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = data
        let failure: String? = input.withUnsafeMutableBytes { source in
            stream.next_in = source.baseAddress?.assumingMemoryBound(to: Bytef.self)
            stream.avail_in = uInt(source.count)
            while true {
                let status = chunk.withUnsafeMutableBytes { buffer in
                    stream.next_out = buffer.baseAddress?.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(buffer.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                if output.count + produced > limit { return "the data inflates to more than \(limit) bytes" }
                output.append(contentsOf: chunk[0..<produced])
                switch status {
                case Z_STREAM_END:
                    return nil
                case Z_OK where produced == 0 && stream.avail_in == 0, Z_BUF_ERROR:
                    return "the compressed data ends early (after \(data.count) bytes)"
                case Z_OK:
                    continue
                default:
                    let reason = stream.msg.map { String(cString: $0) } ?? String(cString: zError(status))
                    return "the compressed data is damaged near byte \(stream.total_in): \(reason)"
                }
            }
        }
        if let failure { throw Failure(description: failure) }
        return output
    }

    /// `data` compressed at zlib's default level.
    ///
    /// - Throws: ``Failure`` when zlib cannot start (out of memory) or fails.
    static func deflate(_ data: Data) throws(Failure) -> Data {
        var stream = z_stream()
        let started = czlib_deflate_init_raw(&stream, Z_DEFAULT_COMPRESSION)
        guard started == Z_OK else {
            throw Failure(description: "zlib could not start compressing (\(String(cString: zError(started))))")
        }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(data.count))))
        var input = data
        let status = input.withUnsafeMutableBytes { source in
            output.withUnsafeMutableBytes { target in
                stream.next_in = source.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_in = uInt(source.count)
                stream.next_out = target.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(target.count)
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else {
            throw Failure(description: "zlib could not compress the data (\(String(cString: zError(status))))")
        }
        return Data(output.prefix(Int(stream.total_out)))
    }
}
