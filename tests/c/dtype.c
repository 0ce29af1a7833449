/* Derived datatypes: constructors, bounds, sends of non-contiguous data, pack/unpack. */
#include <stddef.h>
#include <string.h>
#include "check.h"

static int rank, size;

static void vector_column(void) {
    /* Column 1 of a 4x3 matrix of ints. */
    int m[4][3], col[4] = {0}, back[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) m[i][j] = 10 * i + j;
    MPI_Datatype column;
    CHECK_OK(MPI_Type_vector(4, 1, 3, MPI_INT, &column));
    CHECK_OK(MPI_Type_commit(&column));
    int sz;
    MPI_Aint lb, ext, tlb, text;
    CHECK_OK(MPI_Type_size(column, &sz));
    CHECK_OK(MPI_Type_get_extent(column, &lb, &ext));
    CHECK_OK(MPI_Type_get_true_extent(column, &tlb, &text));
    CHECK(sz == 16 && lb == 0 && ext == 40 && tlb == 0 && text == 40);
    MPI_Request r;
    CHECK_OK(MPI_Isend(&m[0][1], 1, column, rank, 1, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Recv(col, 4, MPI_INT, rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(col[i] == 10 * i + 1);
    /* And back into a column of another matrix. */
    memset(back, 0, sizeof back);
    MPI_Status s;
    CHECK_OK(MPI_Isend(col, 4, MPI_INT, rank, 2, MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Recv(&back[0][2], 1, column, rank, 2, MPI_COMM_WORLD, &s));
    CHECK_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++) CHECK(back[i][2] == 10 * i + 1 && back[i][0] == 0 && back[i][1] == 0);
    int count, elems;
    CHECK_OK(MPI_Get_count(&s, column, &count));
    CHECK_OK(MPI_Get_elements(&s, column, &elems));
    CHECK(count == 1 && elems == 4);
    CHECK_OK(MPI_Type_free(&column));
    CHECK(column == MPI_DATATYPE_NULL);
}

struct particle { double pos[3]; int id; char tag; };

static void structs(void) {
    struct particle p[2] = {{{1, 2, 3}, 7, 'a'}, {{4, 5, 6}, 8, 'b'}}, q[2];
    int bl[3] = {3, 1, 1};
    MPI_Aint d[3] = {offsetof(struct particle, pos), offsetof(struct particle, id), offsetof(struct particle, tag)};
    MPI_Datatype t[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, st, rs;
    CHECK_OK(MPI_Type_create_struct(3, bl, d, t, &st));
    CHECK_OK(MPI_Type_create_resized(st, 0, sizeof(struct particle), &rs));
    CHECK_OK(MPI_Type_commit(&rs));
    int sz;
    MPI_Aint lb, ext;
    CHECK_OK(MPI_Type_size(rs, &sz));
    CHECK_OK(MPI_Type_get_extent(rs, &lb, &ext));
    CHECK(sz == 29 && lb == 0 && ext == (MPI_Aint)sizeof(struct particle));
    memset(q, 0, sizeof q);
    CHECK_OK(MPI_Sendrecv(p, 2, rs, rank, 3, q, 2, rs, rank, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(q[1].pos[2] == 6 && q[1].id == 8 && q[1].tag == 'b' && q[0].pos[0] == 1 && q[0].tag == 'a');

    /* Absolute addresses with MPI_BOTTOM. */
    int a = 5;
    double b = 2.25;
    MPI_Aint addr[2];
    CHECK_OK(MPI_Get_address(&a, &addr[0]));
    CHECK_OK(MPI_Get_address(&b, &addr[1]));
    int one[2] = {1, 1};
    MPI_Datatype tt[2] = {MPI_INT, MPI_DOUBLE}, abs_t;
    CHECK_OK(MPI_Type_create_struct(2, one, addr, tt, &abs_t));
    CHECK_OK(MPI_Type_commit(&abs_t));
    char packed[64];
    int pos = 0;
    CHECK_OK(MPI_Pack(MPI_BOTTOM, 1, abs_t, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == 12);
    a = 0;
    b = 0;
    pos = 0;
    CHECK_OK(MPI_Unpack(packed, sizeof packed, &pos, MPI_BOTTOM, 1, abs_t, MPI_COMM_WORLD));
    CHECK(a == 5 && b == 2.25 && pos == 12);
    CHECK_OK(MPI_Type_free(&abs_t));
    CHECK_OK(MPI_Type_free(&st));
    CHECK_OK(MPI_Type_free(&rs));
}

static void indexed_and_pack(void) {
    int src[10], dst[10];
    for (int i = 0; i < 10; i++) src[i] = i;
    int bl[2] = {2, 3}, di[2] = {1, 6}, dib[3] = {0, 4, 8};
    MPI_Datatype ix, ib, hv, cont, dup;
    CHECK_OK(MPI_Type_indexed(2, bl, di, MPI_INT, &ix));
    CHECK_OK(MPI_Type_create_indexed_block(3, 2, dib, MPI_INT, &ib));
    CHECK_OK(MPI_Type_create_hvector(2, 1, 3 * sizeof(int), MPI_INT, &hv));
    CHECK_OK(MPI_Type_contiguous(5, MPI_INT, &cont));
    CHECK_OK(MPI_Type_dup(ix, &dup));
    MPI_Datatype all[5] = {ix, ib, hv, cont, dup};
    for (int i = 0; i < 5; i++) CHECK_OK(MPI_Type_commit(&all[i]));
    int psize;
    CHECK_OK(MPI_Pack_size(1, ix, MPI_COMM_WORLD, &psize));
    CHECK(psize == 20);
    char buf[64];
    int pos = 0;
    CHECK_OK(MPI_Pack(src, 1, ix, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK_OK(MPI_Pack(src, 1, hv, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos == 28);
    int flat[7];
    memcpy(flat, buf, sizeof flat);
    CHECK(flat[0] == 1 && flat[1] == 2 && flat[2] == 6 && flat[4] == 8 && flat[5] == 0 && flat[6] == 3);
    memset(dst, -1, sizeof dst);
    pos = 0;
    CHECK_OK(MPI_Unpack(buf, sizeof buf, &pos, dst, 1, dup, MPI_COMM_WORLD));
    CHECK(dst[0] == -1 && dst[1] == 1 && dst[2] == 2 && dst[3] == -1 && dst[6] == 6 && dst[8] == 8 && dst[9] == -1);
    /* Indexed block sent, received contiguous. */
    int got[6];
    CHECK_OK(MPI_Sendrecv(src, 1, ib, rank, 4, got, 6, MPI_INT, rank, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(got[0] == 0 && got[1] == 1 && got[2] == 4 && got[5] == 9);
    CHECK_OK(MPI_Sendrecv(src, 2, cont, rank, 5, dst, 10, MPI_INT, rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int i = 0; i < 10; i++) CHECK(dst[i] == i);
    /* Pack into a buffer too small. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pos = 60;
    CHECK(MPI_Pack(src, 1, ix, buf, sizeof buf, &pos, MPI_COMM_WORLD) == MPI_ERR_TRUNCATE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    CHECK_OK(MPI_Type_set_name(ix, "two runs"));
    CHECK_OK(MPI_Type_get_name(ix, name, &len));
    CHECK(len == 8 && strcmp(name, "two runs") == 0);
    CHECK_OK(MPI_Type_get_name(MPI_DOUBLE, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE") == 0);
    for (int i = 0; i < 5; i++) CHECK_OK(MPI_Type_free(&all[i]));
}

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    vector_column();
    structs();
    indexed_and_pack();
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("dtype: OK\n");
    return 0;
}
