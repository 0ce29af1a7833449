/* Communicators, groups, attributes, names, info objects. */
#include <string.h>
#include "check.h"

static int rank, size;

int main(int argc, char **argv) {
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));

    MPI_Comm dup, half, shm, sub;
    int res, r, s;
    CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
    CHECK(res == MPI_CONGRUENT);
    CHECK_OK(MPI_Comm_compare(dup, dup, &res));
    CHECK(res == MPI_IDENT);
    /* Traffic on the duplicate does not match traffic on the world. */
    int a = 1, b = 2, x = 0;
    MPI_Request q;
    CHECK_OK(MPI_Isend(&a, 1, MPI_INT, rank, 0, MPI_COMM_WORLD, &q));
    CHECK_OK(MPI_Send(&b, 1, MPI_INT, rank, 0, dup));
    CHECK_OK(MPI_Recv(&x, 1, MPI_INT, rank, 0, dup, MPI_STATUS_IGNORE));
    CHECK(x == 2);
    CHECK_OK(MPI_Recv(&x, 1, MPI_INT, rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(x == 1);
    CHECK_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));

    /* Split by parity, reverse order. */
    CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
    CHECK_OK(MPI_Comm_rank(half, &r));
    CHECK_OK(MPI_Comm_size(half, &s));
    CHECK(s == (size + 1 - rank % 2) / 2);
    CHECK(r == s - 1 - rank / 2);
    int sum = 0;
    CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
    int expect = 0;
    for (int i = rank % 2; i < size; i += 2) expect += i;
    CHECK(sum == expect);
    MPI_Comm none;
    CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, MPI_UNDEFINED, 0, &none));
    CHECK(none == MPI_COMM_NULL);

    /* The ranks of one node. */
    CHECK_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm));
    CHECK_OK(MPI_Comm_size(shm, &s));
    CHECK(s >= 1 && s <= size);

    /* Groups. */
    MPI_Group world, first, rest;
    CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_OK(MPI_Group_size(world, &s));
    CHECK_OK(MPI_Group_rank(world, &r));
    CHECK(s == size && r == rank);
    int zero = 0;
    CHECK_OK(MPI_Group_incl(world, 1, &zero, &first));
    CHECK_OK(MPI_Group_excl(world, 1, &zero, &rest));
    CHECK_OK(MPI_Group_size(rest, &s));
    CHECK(s == size - 1);
    CHECK_OK(MPI_Group_rank(first, &r));
    CHECK(r == (rank == 0 ? 0 : MPI_UNDEFINED));
    int last = size - 1, t = -5;
    CHECK_OK(MPI_Group_translate_ranks(world, 1, &last, rest, &t));
    CHECK(t == (size > 1 ? size - 2 : MPI_UNDEFINED));
    CHECK_OK(MPI_Comm_create(MPI_COMM_WORLD, first, &sub));
    if (rank == 0) {
        CHECK(sub != MPI_COMM_NULL);
        CHECK_OK(MPI_Comm_size(sub, &s));
        CHECK(s == 1);
        CHECK_OK(MPI_Comm_free(&sub));
    } else {
        CHECK(sub == MPI_COMM_NULL);
    }
    CHECK_OK(MPI_Group_free(&first));
    CHECK_OK(MPI_Group_free(&rest));
    CHECK_OK(MPI_Group_free(&world));
    CHECK(world == MPI_GROUP_NULL);

    /* Attributes. */
    int key, flag, *tag_ub, *v;
    static int payload = 1234;
    CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
    CHECK(flag && *tag_ub >= 32767);
    CHECK_OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL));
    CHECK_OK(MPI_Comm_get_attr(dup, key, &v, &flag));
    CHECK(flag == 0);
    CHECK_OK(MPI_Comm_set_attr(dup, key, &payload));
    CHECK_OK(MPI_Comm_get_attr(dup, key, &v, &flag));
    CHECK(flag == 1 && v == &payload);
    MPI_Comm dup2;
    CHECK_OK(MPI_Comm_dup(dup, &dup2));
    CHECK_OK(MPI_Comm_get_attr(dup2, key, &v, &flag));
    CHECK(flag == 1 && *v == 1234);
    CHECK_OK(MPI_Comm_delete_attr(dup, key));
    CHECK_OK(MPI_Comm_get_attr(dup, key, &v, &flag));
    CHECK(flag == 0);
    CHECK_OK(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID);

    /* Names. */
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    CHECK_OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
    CHECK_OK(MPI_Comm_set_name(dup, "my dup"));
    CHECK_OK(MPI_Comm_get_name(dup, name, &len));
    CHECK(strcmp(name, "my dup") == 0);

    /* Info. */
    MPI_Info info, info2;
    char val[MPI_MAX_INFO_VAL], key_s[MPI_MAX_INFO_KEY];
    int n, blen = sizeof val;
    CHECK_OK(MPI_Info_create(&info));
    CHECK_OK(MPI_Info_set(info, "alpha", "1"));
    CHECK_OK(MPI_Info_set(info, "beta", "two"));
    CHECK_OK(MPI_Info_dup(info, &info2));
    CHECK_OK(MPI_Info_delete(info, "alpha"));
    CHECK_OK(MPI_Info_get_nkeys(info2, &n));
    CHECK(n == 2);
    CHECK_OK(MPI_Info_get_nthkey(info2, 1, key_s));
    CHECK(strcmp(key_s, "beta") == 0);
    CHECK_OK(MPI_Info_get_string(info2, "beta", &blen, val, &flag));
    CHECK(flag == 1 && strcmp(val, "two") == 0 && blen == 4);
    CHECK_OK(MPI_Info_get_string(info, "alpha", &blen, val, &flag));
    CHECK(flag == 0);
    CHECK_OK(MPI_Info_free(&info));
    CHECK_OK(MPI_Info_free(&info2));
    CHECK(info == MPI_INFO_NULL);

    CHECK_OK(MPI_Comm_free(&dup2));
    CHECK_OK(MPI_Comm_free(&dup));
    CHECK_OK(MPI_Comm_free(&half));
    CHECK_OK(MPI_Comm_free(&shm));
    CHECK(dup == MPI_COMM_NULL);
    CHECK_OK(MPI_Finalize());
    if (rank == 0) printf("comm: OK\n");
    return 0;
}
